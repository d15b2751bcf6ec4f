// Package redispool holds the process's Redis clients (each with the
// Batchers that put its rules' calls on the wire) and fleet heartbeats
// for edgelimit's store redis, each in a caddy.UsagePool keyed by its
// settings, so that a Caddy reload with the same redis block keeps its
// client (and pooled connections) and its node id in the fleet. It
// touches no state of caddymodule, which parses the redis block into
// Settings and makes each rule's redisstore.Store on the pooled client.
package redispool

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/redisstore"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// MinDialTimeout bounds a dial from below: the call's deadline still
// bounds a dial on the request path.
const MinDialTimeout = time.Second

// Settings is a store's redis block with its placeholders replaced and
// its defaults filled in: what a client is made from.
type Settings struct {
	Addrs              []string
	Username, Password string
	DB                 int
	TLS, Cluster       bool
	Master             string // a master found through Sentinels (Addrs)
	SentinelUsername   string // on the Sentinels, with Master
	SentinelPassword   string
	Timeout            time.Duration // a call's deadline
	Probe              time.Duration // the breaker's probe interval
	Prefix             string        // the keys' prefix
	Coalesce           bool
	Pipeline           bool   // concurrent calls share round trips (redisstore.Batcher)
	OverLimit          bool   // the over-limit cache is on
	Print              string // what the client is made from, hashed: the pool's key
}

// newClient makes the client of s. It does not connect: the first
// call does. Deadlines come from each call's context, and nothing is
// retried: a script retried after a lost reply may have run already (see
// package redisstore).
func newClient(s Settings) redis.UniversalClient {
	logOnce.Do(func() { redis.SetLogger(goRedisLog{caddy.Log().Named("rate_limit.redis")}) })
	opts := &redis.UniversalOptions{
		Addrs:    s.Addrs,
		Username: s.Username,
		Password: s.Password,
		DB:       s.DB,

		MasterName:       s.Master,
		SentinelUsername: s.SentinelUsername,
		SentinelPassword: s.SentinelPassword,

		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           max(s.Timeout, MinDialTimeout), // the call's deadline still bounds a dial on the request path
		ReadTimeout:           s.Timeout,
		WriteTimeout:          s.Timeout,
		PoolTimeout:           s.Timeout,
	}
	if s.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch {
	case s.Master != "":
		return redis.NewFailoverClient(opts.Failover())
	case s.Cluster:
		return redis.NewClusterClient(opts.Cluster())
	}
	return redis.NewClient(opts.Simple())
}

// logOnce sets go-redis's logger, process-wide, once.
var logOnce sync.Once

// goRedisLog writes go-redis's own log lines (a failed dial, every time)
// at debug level: the rules log Redis failures themselves, at most one
// line per probe interval.
type goRedisLog struct{ logger *zap.Logger }

func (l goRedisLog) Printf(_ context.Context, format string, v ...any) {
	if ce := l.logger.Check(zap.DebugLevel, fmt.Sprintf(format, v...)); ce != nil {
		ce.Write()
	}
}

// clients holds the process's Redis client of each configuration,
// keyed by Settings.Print: a reload that keeps the redis block keeps
// its client (and its pooled connections); the last config using a client
// closes it.
var clients = caddy.NewUsagePool()

// Client is a client of the pool.
type Client struct {
	// Redis is the client.
	Redis redis.UniversalClient
	// Batch puts the concurrent calls of every rule on Redis in shared
	// pipelines (pipeline on); Alone sends each call by itself (pipeline
	// off). Both count into Wire.
	Batch, Alone *redisstore.Batcher
	print        string // its key in clients
}

// Wire counts the round trips and scripts of every rule's calls to
// Redis, process-wide, for metrics.
var Wire redisstore.BatchCounters

// Batcher is the Batcher of the calls of a store with s: Batch or Alone.
func (c *Client) Batcher(s Settings) *redisstore.Batcher {
	if s.Pipeline {
		return c.Batch
	}
	return c.Alone
}

// Destruct closes the client, when the last config using it is gone.
func (c *Client) Destruct() error { return c.Redis.Close() }

// Acquire returns the client of s, with one more use. It does not
// connect: the first call does.
func Acquire(s Settings) *Client {
	v, _, _ := clients.LoadOrNew(s.Print, func() (caddy.Destructor, error) {
		r := newClient(s)
		return &Client{
			Redis: r, print: s.Print,
			Batch: redisstore.NewBatcher(r, redisstore.BatcherConfig{Counters: &Wire}),
			Alone: redisstore.NewBatcher(r, redisstore.BatcherConfig{MaxBatch: 1, Counters: &Wire}),
		}, nil
	})
	return v.(*Client)
}

// Release drops one use of c, and closes it with the last.
func Release(c *Client) { _, _ = clients.Delete(c.print) }
