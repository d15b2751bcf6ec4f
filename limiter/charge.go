package limiter

import (
	"math"
	"time"
)

// A charge takes units after the fact (count_status, cost_header): the
// request was checked before it ran (a reservation of its cost, or
// PeekScaledAt with a cost of 1: one unit left), and what it costs is taken once its response is known,
// whatever the limit says, so that later requests wait as if the request
// had taken the units when it came. "Past the limit", per algorithm:
//
//   - FixedWindow: the window's count goes beyond the limit (up to
//     MaxCount); requests are denied until the window ends, and the next
//     window starts from zero: the excess is forgiven at the window's end.
//   - SlidingWindow: the current count goes beyond the limit (up to 2³²−1);
//     in the next window it weighs as the previous count, so the excess
//     delays requests into that window, until prev×(1−elapsed/W)+curr has
//     fallen below the limit; it is forgotten two windows on.
//   - SlidingLog: the charge is one event of all its units, at now (the
//     units held may exceed the limit); requests are denied until enough
//     events leave the window. The log stays bounded: once it holds as many
//     events as the limit's count, a charge joins the newest event, which
//     moves to now (its units then leave the window later, never earlier).
//   - TokenBucket, and the burst bucket in front of a window: the TAT moves
//     on by cost×W/N, beyond a full bucket of work: the key owes the
//     units, and the next unit fits once the bucket has drained to one
//     unit's room. The debt is kept under a scale too (a flag in the
//     fraction word keeps a scaled decision from reading the TAT as a full
//     bucket, see atMostFull), until a decision takes units again.
//   - LeakyBucket: the queue's TAT moves on by cost×W/N, beyond the queue's
//     depth and MaxDelay: requests are denied until the queue is back
//     within them.
//
// Every limit of the rule is charged, and the burst bucket; a share's
// demand counts the units.

// debtBit in a bucket's fraction word marks a TAT that a charge put beyond
// a full bucket: a debt, which a scaled decision keeps rather than reading
// it as a full bucket (atMostFull). A fraction is below n ≤ MaxCount, so
// the bit is free; backlog reads the word as at most n−1 (off by under a
// nanosecond), and any decision that takes units writes a fraction
// without it. A word with the bit is never 0, so the hot paths (fast.go,
// lockfree.go), which need a fraction of 0, leave such a key to the
// general path.
const debtBit = 1 << 63

// Charge takes cost units from key at now, regardless of the limits,
// creating the key if need be; scale is the one its check used (as in
// AllowScaledAt; 1 for AllowAt). The units land in the state in force at
// now, not where the request's reservation was taken (which Refund
// respects): a charge only makes later requests wait, and a window that
// has rolled could not hold it. A cost of 0 or less, or a scale of 0 or less,
// takes nothing. It takes the shard's lock, and a decision on the key
// racing on the lock-free path either lands before it or retries after.
// A charge leaves a known key spent if it is at or past a limit.
func (l *Limiter) Charge(key string, now time.Time, cost int64, scale float64) {
	if cost <= 0 {
		return
	}
	p := l.plan.Load()
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	t := now.UnixNano()
	s.mu.Lock()
	slot, ok := s.table.find(h)
	if !ok {
		slot = s.insert(h, p, t)
	}
	var buf [3]uint64
	w := s.table.hold(slot, &buf)
	w[0] |= dirtyBit
	if ok {
		w[0] |= refBit
	}
	logs := s.table.logsAt(slot)
	charged := p.charge(w, logs, t, cost, scale)
	spent := false
	if ok && charged {
		spent = p.spentAfterCharge(w, logs, t, scale)
	}
	s.table.put(slot, w)
	if ok && charged {
		s.table.setSpent(slot, spent)
	}
	s.mu.Unlock()
}

// charge takes cost (> 0) units from a key's words and logs at now,
// whatever the limits, and reports whether it took any (a scale of 0 or
// less takes nothing but the demand).
func (p *plan) charge(words []uint64, logs []eventLog, now, cost int64, scale float64) bool {
	cost = min(cost, MaxCount)
	if p.shareW != 0 {
		scale *= shareOf(words[p.shareW])
		words[p.shareW] = addDemand(words[p.shareW], cost)
	}
	if !(scale > 0) {
		return false
	}
	if scale != 1 {
		// a TAT beyond a full bucket that a smaller scale left is no debt:
		// read as a full bucket, as a scaled decision would, before the
		// charge adds its own
		p.atMostFull(words, now, scale)
	}
	for i := range p.limits {
		lp := &p.limits[i]
		if p.algo == SlidingLog {
			chargeLog(&logs[lp.word], now, lp.w, scaled(lp.n, scale), cost)
			continue
		}
		a, b := &words[lp.word], &words[lp.word+1]
		switch p.algo {
		case FixedWindow:
			cur := max(p.windowStart(i, now), int64(*a))
			if int64(*a) != cur {
				*b = 0
			}
			*a, *b = uint64(cur), min(*b+uint64(cost), MaxCount)
		case SlidingWindow:
			*a, *b = chargeSliding(*a, *b, p.slidingCur(i, *a, *b, now), lp.w, cost)
		case TokenBucket:
			w, n := p.bucketRate(lp, scale)
			chargeBucket(a, b, now, w, n, scaled(lp.capacity, scale), true, cost)
		case LeakyBucket:
			chargeBucket(a, b, now, lp.w, scaled(lp.n, scale), 0, false, cost)
		}
	}
	if p.burstW != 0 {
		lp := &p.limits[p.burstAt]
		chargeBucket(&words[p.burstW], &words[p.burstW+1], now, lp.w, scaled(lp.n, scale), scaled(p.cfg.Burst, scale), true, cost)
	}
	return true
}

// spentAfterCharge is whether a charge left the key without a unit of
// one of its limits. A sliding log is spent when a limit's log holds its
// count (the charge has just expired what left the window): a decision
// over the limit would scan the log for its retry time.
func (p *plan) spentAfterCharge(words []uint64, logs []eventLog, now int64, scale float64) bool {
	if p.algo == SlidingLog {
		if p.shareW != 0 {
			scale *= shareOf(words[p.shareW])
		}
		for _, lp := range p.limits {
			if logs[lp.word].total >= scaled(lp.n, scale) {
				return true
			}
		}
		return false
	}
	var d Decision
	p.decide(&d, words, logs, now, 0, scale, false)
	return d.spent()
}

// chargeSliding adds cost to a sliding window's current count (in the
// window starting at cur), saturating at 2³²−1.
func chargeSliding(a, b uint64, cur, w, cost int64) (uint64, uint64) {
	start := int64(a)
	cur = max(cur, start) // time went backwards: stay in the later window
	var prev, curr uint64
	switch {
	case start >= cur:
		prev, curr = b>>32, b&math.MaxUint32
	case start >= cur-w:
		prev = b & math.MaxUint32
	}
	curr = min(curr+uint64(cost), math.MaxUint32)
	return uint64(cur), prev<<32 | curr
}

// chargeLog records cost units at now (or at the newest event, if time
// went backwards) in a log of limit n, expiring the events that left the
// window; with n events held already, the units join the newest event,
// moved to now.
func chargeLog(l *eventLog, now, w, n, cost int64) {
	t := max(now, l.newest())
	l.expire(t - w)
	if int64(l.n) >= n && l.n > 0 {
		e := l.at(l.n - 1)
		e.at, e.units = t, e.units+cost
		l.total += cost
		return
	}
	l.push(t, cost)
}

// chargeBucket moves a bucket's TAT on by cost units of w/n; a token
// bucket's (token set) is marked a debt if it ends beyond a full bucket of
// capacity units.
func chargeBucket(a, b *uint64, now, w, n, capacity int64, token bool, cost int64) {
	x := backlog(*a, *b, now, n).add(mul(uint64(cost), uint64(w)))
	*a, *b, _ = tatAfter(now, x, n)
	if token && tolerance(capacity, w, n).less(x) {
		*b |= debtBit
	}
}
