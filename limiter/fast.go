package limiter

import "sync/atomic"

// The hot path spares the divisions a decision costs in the common case,
// with the same results as the general steps (window.go, bucket.go): a
// 64-bit division takes tens of cycles, and a decision on a hot key made
// three or four of them.
//
//   - A window's start (alignDown) is read from the last one computed for
//     the limit, if now falls in it (windowStarts).
//   - A sliding window whose previous count is 0 weighs nothing: the count
//     in force is the current one, compared without a product.
//   - A bucket whose unit (w/n ns) is a whole number and whose TAT holds
//     no fraction (unitBucket) is kept in nanoseconds on 64 bits.

// windowStarts remembers, per limit of a plan, the start of a window that
// a decision computed: a decision whose now falls in it takes it instead
// of dividing. It is shared by every key of the plan, and written once a
// window (more often only if decisions straddle a window's edge).
type windowStarts []atomic.Int64

// at is alignDown(now, w) for limit i of window w.
func (ws windowStarts) at(i int, now, w int64) int64 {
	if c := ws[i].Load(); now >= c && now-c < w {
		return c
	}
	c := alignDown(now, w)
	ws[i].Store(c)
	return c
}

// unitBucket is a bucket limit whose unit, w/n, is a whole number of
// nanoseconds: unscaled, a TAT with no fraction then keeps none, and the
// arithmetic of tokenBucket and leakyBucket holds in nanoseconds. The zero
// value (unit 0) means the limit does not qualify.
type unitBucket struct {
	unit uint64 // w/n, ns
	// limit is, for a TokenBucket, its tolerance (capacity units); for a
	// LeakyBucket, the most a request may wait (maxDelay, and depth units
	// if depth > 0). In ns, at most maxSpan.
	limit uint64
	// maxCost is limit/unit, the largest cost that may fit a TokenBucket.
	maxCost uint64
	inv     float64 // 1/unit, for quo
}

// quo is ⌊x/unit⌋, by a multiplication where x is small enough for a
// float64 to hold it exactly (2^53 ns, 104 days): the estimate is then
// within 2 of the quotient, and corrected.
func (ub unitBucket) quo(x uint64) uint64 {
	if x >= 1<<53 {
		return x / ub.unit
	}
	q := uint64(float64(x) * ub.inv)
	for q*ub.unit > x {
		q--
	}
	for (q+1)*ub.unit <= x {
		q++
	}
	return q
}

// newUnitBucket is the unitBucket of a limit of n per w with the given
// capacity (TokenBucket) or queue depth (LeakyBucket, maxDelay ≥ 0), or
// the zero value if w/n is not whole or the window exceeds maxSpan.
func newUnitBucket(algo Algorithm, n, w, capacity, maxDelay int64) unitBucket {
	if n <= 0 || w <= 0 || w%n != 0 || w > maxSpan {
		return unitBucket{}
	}
	u := uint64(w / n)
	units := func(c int64) uint64 { // c units in ns, at most maxSpan
		if uint64(c) > maxSpan/u {
			return maxSpan
		}
		return uint64(c) * u
	}
	var l uint64
	switch algo {
	case TokenBucket:
		l = units(capacity)
	case LeakyBucket:
		l = uint64(min(max(maxDelay, 0), maxSpan))
		if capacity > 0 {
			l = min(l, units(capacity))
		}
	default:
		return unitBucket{}
	}
	return unitBucket{unit: u, limit: l, maxCost: l / u, inv: 1 / float64(u)}
}

// backlog is how far TAT a is ahead of now, in ns (0 if past).
func (ub unitBucket) backlog(a uint64, now int64) uint64 {
	if int64(a) < now {
		return 0
	}
	return uint64(int64(a) - now)
}

// token is tokenBucket, unscaled, for a TAT a with no fraction and a cost
// of at most the capacity, if it allows the request; it reports false
// otherwise (the caller then runs tokenBucket, which says why).
func (ub unitBucket) token(s *step, a uint64, now, w, n, cost int64) bool {
	if uint64(cost) > ub.maxCost {
		return false
	}
	x := ub.backlog(a, now)
	c := uint64(cost) * ub.unit // at most limit: no overflow
	if x > ub.limit || c > ub.limit-x {
		return false
	}
	next := x + c
	left := ub.quo(ub.limit - next)
	// nextUnit: taking the units left, one more fits a unit less what
	// the tolerance has over them later
	eff := ub.unit - (ub.limit - next - left*ub.unit)
	s.allowed(uint64(now)+next, 0)
	s.quota.set(n, w, int64(left), int64(next), int64(eff))
	return true
}

// leaky is leakyBucket, unscaled, for a TAT a with no fraction and a cost
// of at most n, if it allows the request; it reports false otherwise.
func (ub unitBucket) leaky(s *step, a uint64, now, w, n, cost int64) bool {
	x := ub.backlog(a, now)
	if x > ub.limit {
		return false
	}
	next := x + uint64(cost)*ub.unit // ≤ maxSpan + w ≤ 2^63
	if next > maxSpan {
		return false
	}
	room, eff := int64(0), next-ub.limit // queueNext, with no room
	if next <= ub.limit {
		q := ub.quo(ub.limit - next)
		room, eff = int64(q)+1, ub.unit-(ub.limit-next-q*ub.unit)
	}
	s.allowed(uint64(now)+next, int64(x))
	s.quota.set(n, w, room, int64(next), int64(eff))
	return true
}
