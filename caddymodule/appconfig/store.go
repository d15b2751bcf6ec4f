package appconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/redisstore"
)

// StoreConfig says where the rules with `store redis` keep their state.
// Rules keep it in process (store local) unless they say otherwise.
type StoreConfig struct {
	// Redis is the Redis that rules with store redis share. Required.
	Redis *RedisConfig `json:"redis,omitempty"`
}

// RedisConfig is the Redis (a server, a Redis Cluster, or a master found
// through Sentinels) that rules with `store redis` decide on: every node
// configured with it enforces one exact limit per key. One client per
// process serves every such rule, kept across reloads while this block is
// unchanged.
type RedisConfig struct {
	// Addresses are host:port: the server; with Cluster, seeds of the
	// Redis Cluster; with SentinelMaster, the Sentinels. Placeholders such
	// as {env.REDIS_ADDR} are replaced. Required: one, unless Cluster or
	// SentinelMaster.
	Addresses []string `json:"addresses,omitempty"`

	// Username is the ACL user (Redis 6+). Placeholders are replaced.
	// Default: none (the default user).
	Username string `json:"username,omitempty"`

	// Password authenticates to Redis: the server, every node of the
	// Redis Cluster, or the master found through Sentinels, not the
	// Sentinels themselves (see SentinelPassword). Placeholders such as
	// {env.REDIS_PASSWORD} are replaced. Default: none.
	Password string `json:"password,omitempty"`

	// DB is the logical database; a Redis Cluster has only 0. Default: 0.
	DB int `json:"db,omitempty"`

	// TLS connects with TLS (the system's roots verify the server).
	// Default: off.
	TLS bool `json:"tls,omitempty"`

	// Timeout bounds each call to Redis on the request path, from taking
	// a connection (or dialing one) to reading the reply; past it the
	// rule's on_store_error applies. Default: 50ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// KeyPrefix starts every Redis key; each rule adds its name and ':'.
	// It must not hold '{' or '}'. Default: "edgelimit:".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Cluster makes Addresses the seeds of a Redis Cluster. Default: off.
	Cluster bool `json:"cluster,omitempty"`

	// SentinelMaster is the master's name when Addresses are Sentinels.
	// Placeholders are replaced. Default: none.
	SentinelMaster string `json:"sentinel_master,omitempty"`

	// SentinelUsername is the ACL user on the Sentinels (Redis 6.2+),
	// with SentinelMaster. Placeholders are replaced. Default: none (the
	// default user).
	SentinelUsername string `json:"sentinel_username,omitempty"`

	// SentinelPassword authenticates to the Sentinels (their requirepass,
	// or SentinelUsername's password), with SentinelMaster; Password is
	// the master's. Placeholders such as {env.SENTINEL_PASSWORD} are
	// replaced. Default: none.
	SentinelPassword string `json:"sentinel_password,omitempty"`

	// ProbeInterval is how long a rule fails fast after Redis failed
	// (applying on_store_error without trying it) before one request
	// probes it again; also the most often a rule logs that Redis fails.
	// Default: 1s.
	ProbeInterval caddy.Duration `json:"probe_interval,omitempty"`

	// Coalesce turns coalescing on: the requests of one key (same cost and
	// scale) that arrive while a call for that key is in flight are
	// decided together in the next call, one after the other in one script
	// run, as exactly as separate calls. It saves Redis (and this node)
	// the work of a call per request of a hot key, at the price of up to
	// one call's wait for those requests; a request whose deadline leaves
	// less than the call in flight and two more calls (by the recent
	// calls' duration) calls on its own instead. A key with one request at
	// a time never waits. Default: false (off).
	Coalesce bool `json:"coalesce,omitempty"`

	// NoOverLimitCache turns the over-limit cache off: by default, a key
	// Redis denied is denied by this node without a call until the
	// denial's Retry-After has passed, for a second at most (for requests
	// of at least the cost denied, at the same scale), in a cache of up to
	// 65,536 keys per rule. Units given back meanwhile by another node (a
	// refund, an admin reset) are seen only after that. Default: false
	// (cache on).
	NoOverLimitCache bool `json:"no_over_limit_cache,omitempty"`

	// NoPipeline turns pipelining off: by default, the Redis calls of
	// concurrent requests (of every rule and key) share round trips: a
	// call that finds none in the air is sent at once, and those that
	// arrive meanwhile leave together, up to 128, in one pipeline when it
	// lands. Each is still one script that Redis runs alone, as exact as
	// a call by itself. Off, every call is a round trip of its own.
	// Default: false (pipelining on).
	NoPipeline bool `json:"no_pipeline,omitempty"`
}

// Defaults of the redis block.
const (
	defaultStoreTimeout = 50 * time.Millisecond
	minDialTimeout      = time.Second
)

// Settings checks the configuration and fills in its defaults.
func (c *RedisConfig) Settings() (redispool.Settings, error) {
	repl := caddy.NewReplacer()
	s := redispool.Settings{
		Coalesce: c.Coalesce, OverLimit: !c.NoOverLimitCache, Pipeline: !c.NoPipeline,
		Username: repl.ReplaceKnown(c.Username, ""), Password: repl.ReplaceKnown(c.Password, ""),
		DB: c.DB, TLS: c.TLS, Cluster: c.Cluster, Master: repl.ReplaceKnown(c.SentinelMaster, ""),
		SentinelUsername: repl.ReplaceKnown(c.SentinelUsername, ""), SentinelPassword: repl.ReplaceKnown(c.SentinelPassword, ""),
		Timeout: time.Duration(c.Timeout), Probe: time.Duration(c.ProbeInterval), Prefix: c.KeyPrefix,
	}
	for _, a := range c.Addresses {
		a = repl.ReplaceKnown(a, "")
		if err := CheckRedisAddress(a); err != nil {
			return s, err
		}
		s.Addrs = append(s.Addrs, a)
	}
	switch {
	case len(s.Addrs) == 0:
		return s, fmt.Errorf("store redis: no address")
	case s.Master == "" && (c.SentinelUsername != "" || c.SentinelPassword != ""):
		return s, fmt.Errorf("store redis: sentinel_username and sentinel_password need sentinel_master (they authenticate to Sentinels; password is the server's)")
	case s.Cluster && s.Master != "":
		return s, fmt.Errorf("store redis: cluster on and sentinel_master %q: choose one (a Redis Cluster, or a master found through Sentinels)", s.Master)
	case len(s.Addrs) > 1 && !s.Cluster && s.Master == "":
		return s, fmt.Errorf("store redis: %d addresses: one server has one address (several are the seeds of a Redis Cluster with cluster on, or Sentinels with sentinel_master)", len(s.Addrs))
	case s.DB < 0:
		return s, fmt.Errorf("store redis: db %d: must not be negative", s.DB)
	case s.Cluster && s.DB != 0:
		return s, fmt.Errorf("store redis: db %d: a Redis Cluster has only db 0", s.DB)
	case s.Timeout < 0:
		return s, fmt.Errorf("store redis: timeout %s: must be positive", s.Timeout)
	case s.Probe < 0:
		return s, fmt.Errorf("store redis: probe_interval %s: must be positive", s.Probe)
	case strings.ContainsAny(s.Prefix, "{}"):
		return s, fmt.Errorf("store redis: key_prefix %q: must not contain '{' or '}' (they would move the Redis Cluster hash tag)", s.Prefix)
	}
	if s.Timeout == 0 {
		s.Timeout = defaultStoreTimeout
	}
	if s.Probe == 0 {
		s.Probe = redisstore.DefaultProbeInterval
	}
	if s.Prefix == "" {
		s.Prefix = redisstore.DefaultKeyPrefix
	}
	print, _ := json.Marshal(struct {
		Addrs              []string
		Username, Password string
		DB                 int
		TLS, Cluster       bool
		Master             string
		SentinelUsername   string
		SentinelPassword   string
		Timeout            time.Duration
	}{s.Addrs, s.Username, s.Password, s.DB, s.TLS, s.Cluster, s.Master, s.SentinelUsername, s.SentinelPassword, s.Timeout})
	sum := sha256.Sum256(print)
	s.Print = hex.EncodeToString(sum[:])
	return s, nil
}

// checkRedisAddress checks one address of the redis block.
func CheckRedisAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Errorf("store redis: address %q: want host:port, such as 10.0.0.9:6379", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("store redis: address %q: the port must be a number from 1 to 65535", a)
	}
	return nil
}
