package caddymodule

// The fleet behind a Redis store: every process with the same Redis and
// key_prefix counts itself in Redis (redisstore.Fleet), so that when
// Redis cannot decide, a rule with on_store_error local enforces this
// node's share of its limits (1/N of each, N the nodes last seen), and
// the fleet admits about the limit in total instead of N times it.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/redisstore"
)

// The heartbeat: every nodesBeatInterval, off the request path, each call
// bounded by nodesCallTimeout; a node that stops beating is forgotten by
// the others after nodesTTL (five beats: a slow or missed beat or two does
// not shrink the fleet).
const (
	nodesBeatInterval = time.Second
	nodesCallTimeout  = time.Second
	nodesTTL          = redisstore.DefaultFleetTTL
)

// fleetKey names a fleet: a Redis client of redisClients and the key
// prefix. Processes share a rule's limit when they share both, so they
// count each other under both.
type fleetKey struct {
	client redis.UniversalClient
	prefix string
}

// fleets holds the heartbeat of each fleet in use, process-wide, in a
// caddy.UsagePool keyed by fleetKey: the apps of the configs using a fleet
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
	index atomic.Pointer[map[fleetKey]*redisstore.Fleet]
}

// fleetLoop is a fleet's heartbeat.
type fleetLoop struct {
	key    fleetKey
	fleet  *redisstore.Fleet
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
	pool   *fleetPool
}

// acquire returns the heartbeat of key, started (its first beat at once)
// if it was not running, with one more use; nil if it cannot run (then
// the fallback enforces whole limits).
func (p *fleetPool) acquire(key fleetKey, logger *zap.Logger) *fleetLoop {
	if logger == nil {
		logger = zap.NewNop()
	}
	v, _, err := p.pool.LoadOrNew(key, func() (caddy.Destructor, error) {
		f, err := redisstore.NewFleet(key.client, redisstore.FleetConfig{KeyPrefix: key.prefix, TTL: nodesTTL})
		if err != nil { // the prefix was checked by settings
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		l := &fleetLoop{key: key, fleet: f, logger: logger, cancel: cancel, done: make(chan struct{}), pool: p}
		p.publish(key, l.fleet, nil)
		go l.run(ctx)
		return l, nil
	})
	if err != nil {
		logger.Error("rate limit store: no node count; the fallback enforces whole limits", zap.Error(err))
		return nil
	}
	return v.(*fleetLoop)
}

// release drops one use of l (nil: none); the last stops its heartbeat
// and takes the node out of Redis (within nodesCallTimeout).
func (p *fleetPool) release(l *fleetLoop) {
	if l != nil {
		_, _ = p.pool.Delete(l.key)
	}
}

// Destruct stops the heartbeat and takes the node out of Redis, when the
// last config using the fleet is gone.
func (l *fleetLoop) Destruct() error {
	l.pool.publish(l.key, nil, l.fleet)
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), nodesCallTimeout)
	defer cancel()
	if err := l.fleet.Leave(ctx); err != nil {
		if ce := l.logger.Check(zap.DebugLevel, "rate limit store: leaving the node count failed; the others forget this node after the ttl"); ce != nil {
			ce.Write(zap.String("node", l.fleet.ID()), zap.Duration("ttl", l.fleet.TTL()), zap.Error(err))
		}
	}
	return nil
}

// publish sets the index's fleet of key to add, or takes out remove (if
// it is still the one indexed: a new heartbeat of the key may have
// started meanwhile).
func (p *fleetPool) publish(key fleetKey, add, remove *redisstore.Fleet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	idx := make(map[fleetKey]*redisstore.Fleet)
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

// lookup returns the fleet of key, or nil if none runs. It takes no lock.
func (p *fleetPool) lookup(key fleetKey) *redisstore.Fleet {
	if idx := p.index.Load(); idx != nil {
		return (*idx)[key]
	}
	return nil
}

// run beats at once, then every nodesBeatInterval until ctx ends.
func (l *fleetLoop) run(ctx context.Context) {
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
func (l *fleetLoop) beat(ctx context.Context) {
	before := l.fleet.Nodes()
	callCtx, cancel := context.WithTimeout(ctx, nodesCallTimeout)
	n, err := l.fleet.Beat(callCtx)
	cancel()
	switch {
	case err != nil:
		if ce := l.logger.Check(zap.DebugLevel, "rate limit store: node count beat failed; the last count stays"); ce != nil {
			ce.Write(zap.Int("nodes", n), zap.Error(err))
		}
	case n != before:
		l.logger.Info("rate limit store: nodes sharing redis",
			zap.Int("nodes", n), zap.Int("before", before), zap.String("key", l.fleet.Key()))
	}
}

// fleet is the fleet of the rule's Redis client and key prefix, or nil
// if none runs.
func (st *ruleStore) fleet() *redisstore.Fleet {
	if st == nil {
		return nil
	}
	return fleets.lookup(st.fleetKey)
}

// fallbackShare is the part of its limits a rule with store redis and
// on_store_error local enforces on this node when Redis cannot decide:
// 1/N, N the nodes sharing the Redis and key prefix as last seen through
// Redis (this one included). With one node, or none seen yet, 1: the
// whole limit. Every node falling back at once thus admits about the
// limit in total, not N times it. Multiply it into the scale of the
// in-process decision (limiter.ScaledCount rounds each count down, at
// least 1) and of its refund.
func (st *ruleStore) fallbackShare() float64 {
	if f := st.fleet(); f != nil {
		return 1 / float64(f.Nodes())
	}
	return 1
}

// storeNodes is the number of nodes sharing the app's Redis and key
// prefix, as last seen through Redis; 1 before the first beat.
func (a *App) storeNodes() float64 {
	if a.redis == nil {
		return 1
	}
	if f := fleets.lookup(a.redis.fleetKey()); f != nil {
		return float64(f.Nodes())
	}
	return 1
}
