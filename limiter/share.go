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
// bucket (token or leaky): UsedScaledAt at a scale of 1.
func (l *Limiter) UsedAt(key string, now time.Time) int64 {
	return l.UsedScaledAt(key, now, 1)
}

// UsedScaledAt is UsedAt for a key decided at scale (AllowScaledAt): a
// window's count is the same at any scale; a bucket's (token or leaky) is
// the units its state holds at that scale, not yet refilled (token) or
// drained (leaky), rounded up: how far its TAT is ahead of now over the
// time a unit takes at scale. A charge's debt counts, past the capacity.
func (l *Limiter) UsedScaledAt(key string, now time.Time, scale float64) int64 {
	p := l.plan.Load()
	used := int64(0)
	if p.algo == TokenBucket || p.algo == LeakyBucket {
		if !(scale > 0) {
			return 0
		}
		lp := &p.limits[0]
		l.atKey(key, func(t *table, slot int) {
			var buf [3]uint64
			words := t.snapshot(slot, &buf)
			w, n := p.bucketRate(lp, scale)
			used = backlog(words[lp.word], words[lp.word+1], now.UnixNano(), n).ceil(uint64(w))
		})
		return min(used, MaxCount)
	}
	l.atKey(key, func(t *table, slot int) {
		var st step
		var buf [3]uint64
		p.step(&st, 0, t.snapshot(slot, &buf), t.logsAt(slot), now.UnixNano(), 0, 1)
		used = p.limits[0].n - st.quota.Remaining
	})
	return used
}

// RescaleAt moves key's buckets (token and leaky; nothing for a window)
// from a scale of from to a scale of to (a cluster share that changed),
// keeping the units they hold in use: a bucket's state is the time until
// it is full (or empty) again, which a unit of a smaller scale makes
// longer, so that, left as it is, a key that emptied its bucket at a
// small share would stay empty at a larger one (a key of limit 30 a day
// on one node of three admitted 11 of 30 there, its cold share). Under
// a cut, units past the new capacity are kept as a debt (as a charge's),
// so that what the nodes hold in use together is the same before and
// after a share moves between them. Scales of 0 or less, or equal, do
// nothing, and so does a limiter without Config.Shares.
func (l *Limiter) RescaleAt(key string, now time.Time, from, to float64) {
	p := l.plan.Load()
	if p.shareW == 0 || p.algo != TokenBucket && p.algo != LeakyBucket || !(from > 0) || !(to > 0) || from == to {
		return
	}
	t := now.UnixNano()
	l.atKey(key, func(tb *table, slot int) {
		w := tb.record(slot)
		for i := range p.limits {
			lp := &p.limits[i]
			capacity := int64(0)
			if p.algo == TokenBucket {
				capacity = p.depth(lp.capacity, to)
			}
			wf, nf := p.bucketRate(lp, from)
			wt, nt := p.bucketRate(lp, to)
			rescaleBucket(&w[lp.word], &w[lp.word+1], t, wf, nf, wt, nt, capacity)
		}
	})
}

// rescaleBucket moves a bucket's TAT (a, b) ahead of now from units of
// wf/nf ns to units of wt/nt (bucketRate at each scale), the units held
// the same; capacity > 0 (a token bucket's at the new scale) marks a TAT
// past it as a debt.
func rescaleBucket(a, b *uint64, now, wf, nf, wt, nt, capacity int64) {
	x := backlog(*a, *b, now, nf) // in nf-ths of a ns: x/wf units
	if x.isZero() {
		return
	}
	// x/wf units take x/wf×wt/nt ns at the new rate: y = x×wt/wf nt-ths
	q, r := x.divmod(uint64(wf))
	y := mul(uint64(q), uint64(wt)).add(u128{0, uint64(mul(r, uint64(wt)).div(uint64(wf)))})
	*a, *b, _ = tatAfter(now, y, nt)
	if capacity > 0 && tolerance(capacity, wt, nt).less(y) {
		*b |= debtBit
	}
}
