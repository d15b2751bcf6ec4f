package redisstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// maxCachedKey is the longest key the over-limit cache keeps: longer keys
// always ask Redis, so the cache's memory stays bounded by its count.
const maxCachedKey = 512

// maxCachedFor is the longest a denial is kept, whatever its RetryAfter
// (a daily quota's can be hours): units given back on another node (a
// refund, an admin reset) are seen here within it.
const maxCachedFor = time.Second

// overLimit remembers keys Redis denied, until the denial's RetryAfter
// (Envoy's over-limit cache): a request of such a key, of at least the
// cost denied and at the same scale, is denied without a round trip, with
// the denial's headers counted down. A blocked key's denial is one like
// the others (RetryAfter the block's rest, Block.Started cleared on a
// hit); Reset, which lifts a block, forgets the key here.
type overLimit struct {
	seed   maphash.Seed
	per    int // keys a shard holds at most
	shards [16]deniedShard
}

type deniedShard struct {
	mu    sync.RWMutex
	keys  map[string]denial
	swept int64  // when a full shard was last swept (Unix ns)
	epoch uint64 // counts forgets: a denial from a call begun before one is not kept
}

// A denial is what Redis answered for a key, and until when it holds.
type denial struct {
	cost  int64
	scale float64
	at    time.Time // when it was answered
	until time.Time
	d     Decision
}

func newOverLimit(keys int) *overLimit {
	c := &overLimit{seed: maphash.MakeSeed(), per: max(1, keys/16)}
	for i := range c.shards {
		c.shards[i].keys = make(map[string]denial)
	}
	return c
}

func (c *overLimit) shard(key string) *deniedShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// get returns key's denial as of now if it still holds for a request of
// cost at scale; else the forget count of the key's shard, to give put
// with the denial of the call that follows.
func (c *overLimit) get(key string, cost int64, scale float64, now time.Time) (d Decision, ok bool, epoch uint64) {
	sh := c.shard(key)
	sh.mu.RLock()
	e, found := sh.keys[key]
	epoch = sh.epoch
	sh.mu.RUnlock()
	if !found || cost < e.cost || scale != e.scale || !now.Before(e.until) {
		return Decision{}, false, epoch
	}
	d = e.d
	d.Block.Started = false // the call that was cached started it
	gone := now.Sub(e.at)
	d.RetryAfter = max(d.RetryAfter-gone, 0)
	for i := 0; i < d.Len; i++ {
		d.Quotas[i].Reset = max(d.Quotas[i].Reset-gone, 0)
		d.Quotas[i].Effective = max(d.Quotas[i].Effective-gone, time.Microsecond)
	}
	return d, true, epoch
}

// put remembers a denial of key for cost at scale, decided by Redis at
// about now, until its RetryAfter, for at most maxCachedFor. It keeps
// nothing if a key of the shard was forgotten since get gave epoch (units
// may have come back after Redis decided). A full
// shard first forgets its expired denials (at most once a second); if it
// is still full, the key is not kept.
func (c *overLimit) put(key string, cost int64, scale float64, now time.Time, epoch uint64, d Decision) {
	if d.RetryAfter <= 0 || len(key) > maxCachedKey {
		return
	}
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.epoch != epoch {
		return
	}
	if _, ok := sh.keys[key]; !ok && len(sh.keys) >= c.per {
		if now.UnixNano()-sh.swept < int64(time.Second) {
			return
		}
		sh.swept = now.UnixNano()
		for k, e := range sh.keys {
			if !now.Before(e.until) {
				delete(sh.keys, k)
			}
		}
		if len(sh.keys) >= c.per {
			return
		}
	}
	sh.keys[key] = denial{cost: cost, scale: scale, at: now, until: now.Add(min(d.RetryAfter, maxCachedFor)), d: d}
}

// forget drops key's denial: units came back to it.
func (c *overLimit) forget(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	delete(sh.keys, key)
	sh.epoch++
	sh.mu.Unlock()
}

// len is the number of denials kept, expired ones included.
func (c *overLimit) len() int {
	n := 0
	for i := range c.shards {
		n += c.shards[i].len()
	}
	return n
}

// len is the number of denials sh keeps, expired ones included.
func (sh *deniedShard) len() int {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return len(sh.keys)
}

// Counters count where a Store's decisions came from. A caller that
// wants the counts to outlive the Store (a reload makes a new one) passes
// its own in Config.Counters. Safe for concurrent use.
type Counters struct {
	// Calls is the calls that went to Redis to decide requests (Allow,
	// AllowScaled), failed ones included.
	Calls atomic.Uint64
	// Coalesced is the requests decided in a call another request made.
	Coalesced atomic.Uint64
	// OverLimitCached is the requests the over-limit cache denied.
	OverLimitCached atomic.Uint64
}

// Stats is a snapshot of a Store's Counters, and of its over-limit cache.
type Stats struct {
	Calls, Coalesced, OverLimitCached uint64
	// OverLimitKeys is the keys in the over-limit cache now (some may
	// have expired, not yet swept).
	OverLimitKeys int
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Calls: s.stats.Calls.Load(), Coalesced: s.stats.Coalesced.Load(), OverLimitCached: s.stats.OverLimitCached.Load()}
	if s.denied != nil {
		st.OverLimitKeys = s.denied.len()
	}
	return st
}
