package limiter

import (
	"math"
	"time"
)

// A cluster that divides a global limit between nodes keeps, per key, this
// node's share of it and the demand the node saw (Config.Shares). The
// share word holds the share as a float32 with its bits inverted in its
// high half (0: unset, meaning a share of 1; a share of 0 is 0xffffffff)
// and the units requested since the last TakeDemand in its low half
// (saturating). The float32 keeps a share to a relative 6e-8, however
// small.

func shareOf(word uint64) float64 {
	if hi := uint32(word >> 32); hi != 0 {
		return float64(math.Float32frombits(^hi))
	}
	return 1
}

func addDemand(word uint64, cost int64) uint64 {
	d := uint64(uint32(word)) + uint64(max(cost, 0))
	return word&^math.MaxUint32 | min(d, math.MaxUint32)
}

// SetShareAt sets key's share: every limit of the key is multiplied by it
// (on top of any scale). A share of 0 blocks the key; a negative share
// resets it to the default of 1. The key is created if new. It does
// nothing unless Config.Shares is set.
func (l *Limiter) SetShareAt(key string, share float64, now time.Time) {
	p := l.plan.Load()
	if p.shareW == 0 {
		return
	}
	bits := uint64(0)
	if share >= 0 {
		bits = uint64(^math.Float32bits(float32(share)))
	}
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	s.mu.Lock()
	slot, ok := s.table.find(h)
	if !ok {
		slot = s.insert(h, p, now.UnixNano())
	}
	w := s.table.record(slot)
	w[p.shareW] = bits<<32 | uint64(uint32(w[p.shareW]))
	s.mu.Unlock()
}

// TakeDemand returns the units requested of key (allowed or not) since the
// last call, and its share (1 if unset), and starts counting anew.
func (l *Limiter) TakeDemand(key string) (demand uint64, share float64) {
	p := l.plan.Load()
	if p.shareW == 0 {
		return 0, 1
	}
	demand, share = 0, 1
	l.atKey(key, func(t *table, slot int) {
		w := t.record(slot)
		demand, share = uint64(uint32(w[p.shareW])), shareOf(w[p.shareW])
		w[p.shareW] &^= math.MaxUint32
	})
	return demand, share
}

// UsedAt returns the units key has used of its first limit in the window
// in force at now: the count (a sliding window's weighted estimate), at
// most the limit. It is what a cluster must know of the other nodes'
// use of a window that a share moving between them does not reset. A
// bucket (token or leaky) has no window: 0.
func (l *Limiter) UsedAt(key string, now time.Time) int64 {
	p := l.plan.Load()
	if p.algo == TokenBucket || p.algo == LeakyBucket {
		return 0
	}
	used := int64(0)
	l.atKey(key, func(t *table, slot int) {
		var st step
		var buf [3]uint64
		p.step(&st, 0, t.snapshot(slot, &buf), t.logsAt(slot), now.UnixNano(), 0, 1)
		used = p.limits[0].n - st.quota.Remaining
	})
	return used
}
