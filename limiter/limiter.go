package limiter

import (
	"sync/atomic"
	"time"
)

// Limiter enforces a rule's limits on any number of keys. It is safe for
// concurrent use; each decision locks only the shard of its key, and a
// decision of a one-limit rule on a known key mostly locks nothing
// (lockfree.go).
//
// Create one with New. AllowAt is the decision; Refund gives what an
// allowed decision took back (refund.go: a later rule denied the request,
// or its response was not one count_status counts); Charge takes units
// after the fact (charge.go); PeekAt reads without taking. The methods
// without "At" use time.Now.
type Limiter struct {
	plan   atomic.Pointer[plan]
	seed   hashSeed
	shards []shard
	shift  uint // a hash's top bits pick its shard

	deleted tombstones // keys Delete forgot since the last snapshot (snapshot.go)
}

// New returns a Limiter for cfg, or the error of cfg.Validate.
func New(cfg Config) (*Limiter, error) {
	p, err := newPlan(cfg)
	if err != nil {
		return nil, err
	}
	n := shardCount(p.maxKeys)
	l := &Limiter{seed: newHashSeed(), shards: make([]shard, n), shift: 64}
	for n > 1 {
		l.shift--
		n >>= 1
	}
	for i := range l.shards {
		l.shards[i].table = newTable(p.stride, p.logs) // Reconfigure keeps the layout
		l.shards[i].table.cw = p.lockFreeWord()
	}
	l.setPlan(p)
	return l, nil
}

// Reconfigure changes the limits, burst, delay or key bound while keeping
// every key's state, and reports true. If cfg lays keys out differently
// (another algorithm, another number of limits, a burst bucket added or
// removed), it changes nothing and reports false: the caller starts a new
// Limiter. An invalid cfg is an error.
func (l *Limiter) Reconfigure(cfg Config) (bool, error) {
	p, err := newPlan(cfg)
	if err != nil {
		return false, err
	}
	if !l.fits(p) {
		return false, nil
	}
	l.setPlan(p)
	return true, nil
}

// fits is true if l's keys can be read under p, and l's shards suit p's
// key bound (shards are chosen from MaxKeys at New: a bound that moves far
// enough to want another number of shards needs a successor).
func (l *Limiter) fits(p *plan) bool {
	return p.sameLayout(l.plan.Load()) && shardCount(p.maxKeys) == len(l.shards)
}

// Keeps reports whether Reconfigure(cfg) would keep the keys' state: cfg is
// valid and lays keys out as the configuration in force does.
func (l *Limiter) Keeps(cfg Config) bool {
	p, err := newPlan(cfg)
	return err == nil && l.fits(p)
}

// setPlan installs p and shares its key bound between the shards.
func (l *Limiter) setPlan(p *plan) {
	l.plan.Store(p)
	n := len(l.shards)
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		s.capacity = p.maxKeys / n
		if i < p.maxKeys%n {
			s.capacity++
		}
		s.mu.Unlock()
	}
}

// Config returns the configuration in force.
func (l *Limiter) Config() Config { return l.plan.Load().cfg }

// AllowAt decides whether key may take cost units at now, and takes them if
// so. A cost of 0 or less takes nothing and is allowed unless the limit is
// scaled to zero.
func (l *Limiter) AllowAt(key string, now time.Time, cost int64) (d Decision) {
	l.allow(&d, key, now, cost, 1, true)
	return d
}

// Allow is AllowAt at time.Now().
func (l *Limiter) Allow(key string, cost int64) Decision {
	return l.AllowAt(key, time.Now(), cost)
}

// AllowScaledAt is AllowAt with every limit and burst multiplied by scale
// (rounded down, at least 1); a scale of 0 or less denies everything. The
// key's state is the same whatever the scale, so a key whose scale changes
// keeps its counters.
func (l *Limiter) AllowScaledAt(key string, now time.Time, cost int64, scale float64) (d Decision) {
	l.allow(&d, key, now, cost, scale, true)
	return d
}

// AllowInto is AllowScaledAt deciding into *d instead of returning a
// Decision: a caller that keeps one in its request's state (a handler)
// spares the copy of a 288-byte value. It sets d's Allowed, Delay,
// RetryAfter and Len, and Quotas[:Len]; entries past Len keep what they
// held.
//
// With quotas false the caller will not read the quotas of an allowed
// decision (a handler that sends no RateLimit headers): a decision that
// the lock-free path makes (lockfree.go), or that logTake makes for a
// rule of one sliding log, then computes none and leaves Len 0, so
// Binding means nothing. A denied decision, a decision that takes a key's
// last unit, and the locked path's others have their quotas whatever
// quotas says. What the decision admits and takes is the same either way.
func (l *Limiter) AllowInto(d *Decision, key string, now time.Time, cost int64, scale float64, quotas bool) {
	d.Allowed, d.Delay, d.RetryAfter, d.Len = false, 0, 0, 0
	l.allow(d, key, now, cost, scale, quotas)
}

// allow is AllowInto, deciding into *d, zero but for entries of Quotas
// past those it sets.
func (l *Limiter) allow(d *Decision, key string, now time.Time, cost int64, scale float64, quotas bool) {
	p := l.plan.Load()
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	t := now.UnixNano()
	if s.table.cw != 0 && scale == 1 && allowFast(d, p, h, s, t, cost, quotas) {
		return
	}
	lockShard(s)
	slot, ok := s.table.find(h)
	if ok && p.oneLog && !quotas && scale == 1 && s.table.record(slot)[0]&flagBits == usedBits &&
		logTake(&s.table.logsAt(slot)[0], t, p.limits[0].w, p.limits[0].n, cost) {
		d.Allowed = true // a referenced key, not spent and left so
		s.mu.Unlock()
		return
	}
	if !ok {
		slot = s.insert(h, p, t) // unreferenced until its second request
	}
	var buf [3]uint64
	w := s.table.hold(slot, &buf)
	w[0] |= dirtyBit
	if ok {
		w[0] |= refBit
	}
	p.decide(d, w, s.table.logsAt(slot), t, cost, scale, true)
	s.table.put(slot, w)
	if ok && scale > 0 {
		// A key's first request never marks it spent: a flood of keys
		// sent once cannot outlive a key in use. A scale of 0 denies
		// whatever the state.
		s.table.setSpent(slot, d.spent())
	}
	s.mu.Unlock()
}

// PeekAt is the decision a request of cost units would get at now, taking
// nothing and creating no key.
func (l *Limiter) PeekAt(key string, now time.Time, cost int64) Decision {
	return l.PeekScaledAt(key, now, cost, 1)
}

// PeekScaledAt is PeekAt with every limit and burst multiplied by scale,
// as in AllowScaledAt.
func (l *Limiter) PeekScaledAt(key string, now time.Time, cost int64, scale float64) (d Decision) {
	p := l.plan.Load()
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	t := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot, ok := s.table.find(h); ok {
		var buf [3]uint64
		p.decide(&d, s.table.snapshot(slot, &buf), s.table.logsAt(slot), t, cost, scale, false)
		return d
	}
	var fresh [2*MaxLimits + 4]uint64 // hash, 2 words a limit, burst bucket, share
	var logs [MaxLimits]eventLog
	p.decide(&d, fresh[:p.stride], logs[:p.logs], t, cost, scale, false)
	return d
}

// Contains reports whether key has state.
func (l *Limiter) Contains(key string) bool {
	return l.atKey(key, func(*table, int) {})
}

// atKey runs f on key's slot in its shard's table, under the shard's
// lock, if key has state, and reports whether it has.
func (l *Limiter) atKey(key string, f func(t *table, slot int)) bool {
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.table.find(h)
	if ok {
		f(&s.table, slot)
	}
	return ok
}

// Delete forgets key: its next request starts afresh. It reports whether
// the key had state.
func (l *Limiter) Delete(key string) bool {
	if !l.atKey(key, (*table).remove) {
		return false
	}
	l.deleted.add(hashKey(&l.seed, key)) // the next snapshot forgets it too
	return true
}

// MarkSpent marks key spent, as a decision that left it at a limit does
// (see the spent-key rule in store.go), and reports whether the key has
// state (a key without is not created). Use it for a blocked key: a
// block refuses its requests without a decision, so its counters stay as
// the denial that blocked it left them, and a flood of new keys must not
// evict them while the block runs. The mark holds until the key's next
// decision or charge, or until its counters go idle (the sweep and
// eviction free an idle key, spent or not).
func (l *Limiter) MarkSpent(key string) bool {
	return l.atKey(key, func(t *table, slot int) { t.setSpent(slot, true) })
}

// SweepAt frees every key that is idle at now (whose state is the same as
// a new key's), one shard at a time, and returns how many it freed.
func (l *Limiter) SweepAt(now time.Time) int {
	p, t := l.plan.Load(), now.UnixNano()
	return sumShards(l.shards, func(s *shard) int { return s.sweep(p, t) })
}

// Len is the number of live keys.
func (l *Limiter) Len() int {
	return sumShards(l.shards, (*shard).len)
}

// Evictions is the number of keys evicted to make room since New.
func (l *Limiter) Evictions() uint64 {
	n, _ := l.EvictionCounts()
	return n
}

// EvictionCounts is the number of keys evicted to make room since New, and
// how many of them were spent: left at one of their limits by their last
// decision. A spent key is evicted only when every key of its shard is
// spent too (a sign that MaxKeys is too small for the keys in use).
func (l *Limiter) EvictionCounts() (all, spent uint64) {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		all += s.evictions
		spent += s.limited
		s.mu.Unlock()
	}
	return all, spent
}

func (l *Limiter) shard(h uint64) *shard { return &l.shards[h>>l.shift] }
