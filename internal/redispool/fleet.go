package redispool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/redisstore"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The fleet behind a Redis store: every process with the same Redis and
// key_prefix counts itself in Redis (redisstore.Fleet), so that when
// Redis cannot decide, a rule with on_store_error local enforces this
// node's share of its limits (1/N of each, N the nodes last seen), and
// the fleet admits about the limit in total instead of N times it.

// The heartbeat: every nodesBeatInterval, off the request path, each call
// bounded by nodesCallTimeout; a node that stops beating is forgotten by
// the others after nodesTTL (five beats: a slow or missed beat or two does
// not shrink the fleet).
const (
	nodesBeatInterval = time.Second
	nodesCallTimeout  = time.Second
	nodesTTL          = redisstore.DefaultFleetTTL
)

// FleetKey names a fleet: a Redis client of the pool and the key
// prefix. Processes share a rule's limit when they share both, so they
// count each other under both.
type FleetKey struct {
	Client redis.UniversalClient
	Prefix string
}

// fleets holds the heartbeat of each fleet in use, process-wide, in a
// caddy.UsagePool keyed by FleetKey: the apps of the configs using a fleet
// acquire it at Start and release it at Cleanup, and a reload starts the
// new config before the old one stops, so the heartbeat (and the node's id
// in Redis) runs on across reloads. The last to release it stops it and
// takes the node out of Redis.
var fleets = &fleetPool{pool: caddy.NewUsagePool()}

// fleetPool is the type of fleets.
type fleetPool struct {
	pool *caddy.UsagePool
	mu   sync.Mutex // for index
	// index is the pool's fleets, copied on every change: the request
	// path reads it without a lock.
	index atomic.Pointer[map[FleetKey]*redisstore.Fleet]
}

// Heartbeat is a fleet's heartbeat: this node counted in Redis.
type Heartbeat struct {
	key    FleetKey
	Fleet  *redisstore.Fleet // the fleet counted
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
	pool   *fleetPool
}

// AcquireFleet returns the heartbeat of key, started (its first beat at once)
// if it was not running, with one more use; nil if it cannot run (then
// the fallback enforces whole limits).
func AcquireFleet(key FleetKey, logger *zap.Logger) *Heartbeat {
	p := fleets
	v, _, err := p.pool.LoadOrNew(key, func() (caddy.Destructor, error) {
		f, err := redisstore.NewFleet(key.Client, redisstore.FleetConfig{KeyPrefix: key.Prefix, TTL: nodesTTL})
		if err != nil { // the prefix was checked by settings
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		l := &Heartbeat{key: key, Fleet: f, logger: logger, cancel: cancel, done: make(chan struct{}), pool: p}
		p.publish(key, l.Fleet, nil)
		go l.run(ctx)
		return l, nil
	})
	if err != nil {
		logger.Error("rate limit store: no node count; the fallback enforces whole limits", zap.Error(err))
		return nil
	}
	return v.(*Heartbeat)
}

// ReleaseFleet drops one use of l (nil: none); the last stops its heartbeat
// and takes the node out of Redis (within nodesCallTimeout).
func ReleaseFleet(l *Heartbeat) {
	if l != nil {
		_, _ = fleets.pool.Delete(l.key)
	}
}

// Destruct stops the heartbeat and takes the node out of Redis, when the
// last config using the fleet is gone.
func (l *Heartbeat) Destruct() error {
	l.pool.publish(l.key, nil, l.Fleet)
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), nodesCallTimeout)
	defer cancel()
	if err := l.Fleet.Leave(ctx); err != nil {
		if ce := l.logger.Check(zap.DebugLevel, "rate limit store: leaving the node count failed; the others forget this node after the ttl"); ce != nil {
			ce.Write(zap.String("node", l.Fleet.ID()), zap.Duration("ttl", l.Fleet.TTL()), zap.Error(err))
		}
	}
	return nil
}

// publish sets the index's fleet of key to add, or takes out remove (if
// it is still the one indexed: a new heartbeat of the key may have
// started meanwhile).
func (p *fleetPool) publish(key FleetKey, add, remove *redisstore.Fleet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	idx := make(map[FleetKey]*redisstore.Fleet)
	if old := p.index.Load(); old != nil {
		for k, f := range *old {
			idx[k] = f
		}
	}
	switch {
	case add != nil:
		idx[key] = add
	case idx[key] == remove:
		delete(idx, key)
	}
	p.index.Store(&idx)
}

// LookupFleet returns the fleet of key, or nil if none runs. It takes no
// lock: the request path calls it.
func LookupFleet(key FleetKey) *redisstore.Fleet {
	if idx := fleets.index.Load(); idx != nil {
		return (*idx)[key]
	}
	return nil
}

// run beats at once, then every nodesBeatInterval until ctx ends.
func (l *Heartbeat) run(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(nodesBeatInterval)
	defer t.Stop()
	for {
		l.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beat registers the node for another TTL and logs, at info, when the
// count changes. A failure keeps the last count, and is logged at debug
// only: the rules log Redis failures themselves.
func (l *Heartbeat) beat(ctx context.Context) {
	before := l.Fleet.Nodes()
	callCtx, cancel := context.WithTimeout(ctx, nodesCallTimeout)
	n, err := l.Fleet.Beat(callCtx)
	cancel()
	switch {
	case err != nil:
		if ce := l.logger.Check(zap.DebugLevel, "rate limit store: node count beat failed; the last count stays"); ce != nil {
			ce.Write(zap.Int("nodes", n), zap.Error(err))
		}
	case n != before:
		l.logger.Info("rate limit store: nodes sharing redis",
			zap.Int("nodes", n), zap.Int("before", before), zap.String("key", l.Fleet.Key()))
	}
}
