package limiter

// A bucket, token or leaky, is GCRA: its state is the key's theoretical
// arrival time (TAT), the time at which the bucket is empty of work again.
// A unit costs exactly w/n ns, which is rarely a whole number, so the TAT
// is kept exactly: a = whole nanoseconds, b = the fraction of the next
// nanosecond, in n-ths. Rounding each unit to a nanosecond instead would
// drift: a bucket of capacity 3 at 3 per 10s would take 10s+2ns to refill
// and would not admit 3 requests back to back. The arithmetic is in n-ths of
// a nanosecond, on 128 bits: a unit is w, the tolerance capacity×w.

// backlog is how far a bucket's TAT is ahead of now, in n-ths of a
// nanosecond (0 if the TAT is past). A fraction kept under another n (after
// a change of limit or of scale) is read as at most n−1: off by less than
// a nanosecond. A charge's debtBit (charge.go) is not part of the fraction.
func backlog(a, b uint64, now, n int64) u128 {
	tat := int64(a)
	if tat < now {
		return u128{}
	}
	return mul(uint64(tat-now), uint64(n)).add(u128{0, min(b&^debtBit, uint64(n-1))})
}

// tatAfter is the state of a bucket whose TAT is x (in n-ths of a
// nanosecond) ahead of now, and how long until then, rounded up.
func tatAfter(now int64, x u128, n int64) (a, b uint64, wait int64) {
	q, r := x.divmod(uint64(n))
	wait = q
	if r != 0 {
		wait++
	}
	return uint64(now + q), r, wait
}

// bucketIdle is true if a bucket's TAT is not ahead of now.
func bucketIdle(a, b uint64, now int64) bool {
	return int64(a) < now || int64(a) == now && b == 0
}

// tolerance is how much work a bucket holds, capacity units of w each, in
// n-ths of a nanosecond, at most maxSpan nanoseconds' worth.
func tolerance(capacity, w, n int64) u128 {
	return min128(mul(uint64(capacity), uint64(w)), mul(maxSpan, uint64(n)))
}

// tokenBucket is GCRA with a tolerance of capacity units: a request fits if
// the TAT after it is at most capacity×w/n ahead of now. State: a, b = TAT.
// If scaled, a TAT further ahead than that counts as a full bucket (see
// atMostFull), unless a charge left it there (a debt, charge.go).
func tokenBucket(s *step, a, b uint64, now, w, n, capacity, cost int64, scaled bool) {
	tau := tolerance(capacity, w, n)
	x := backlog(a, b, now, n)
	if scaled && b&debtBit == 0 { // a debt is kept (charge.go)
		x = min128(x, tau)
	}
	if cost > capacity {
		*s = step{quota: tokenQuota(n, w, tau, x), retry: w, never: true}
		return
	}
	next := x.add(mul(uint64(cost), uint64(w)))
	if tau.less(next) {
		*s = step{quota: tokenQuota(n, w, tau, x), retry: next.sub(tau).ceil(uint64(n))}
		return
	}
	a, b, full := tatAfter(now, next, n)
	*s = step{ok: true, a: a, b: b, quota: newQuota(n, w, tau.sub(next).div(uint64(w)), full, nextUnit(tau, next, w, n))}
}

// atMostFull moves a token bucket's TAT back to a full bucket's, capacity
// units ahead of now, if it is further ahead. It applies to scaled
// decisions only, whose scale changes (a cluster share, a country's
// factor): a TAT further ahead than a full bucket is then left by a
// smaller scale, where rounding up to one unit makes a unit cost much
// longer, and is not a debt; without this, a key whose share of a
// cluster's limit rises from a sliver would wait out the long TAT the
// sliver left before using its new share. Unscaled, such a TAT is left by
// the clock going back (or a smaller limit), and is kept: the bucket is
// never nearer to empty for it.
func atMostFull(a, b *uint64, now, w, n, capacity int64) {
	if *b&debtBit != 0 {
		return // a debt a charge left (charge.go), not a smaller scale's TAT
	}
	tau := tolerance(capacity, w, n)
	if tau.less(backlog(*a, *b, now, n)) {
		*a, *b, _ = tatAfter(now, tau, n)
	}
}

// tokenQuota reports a token bucket x ahead of now: the whole units left
// under the tolerance, and the time until it is full.
func tokenQuota(n, w int64, tau, x u128) Quota {
	return newQuota(n, w, tau.sub(x).div(uint64(w)), x.ceil(uint64(n)), nextUnit(tau, x, w, n))
}

// nextUnit is a token bucket's effective window: how long, if the key
// took the whole units left under tolerance limit (x ahead of now), until
// one more fits: taking them leaves limit−x mod w of room, short of w by
// what must drain first (x − limit + w when x is already past limit; all
// in n-ths of a nanosecond).
func nextUnit(limit, x u128, w, n int64) int64 {
	var over u128 // what taking the units left leaves past limit, ≤ w
	if limit.less(x) {
		over = x.sub(limit).add(u128{0, uint64(w)})
	} else {
		_, rem := limit.sub(x).divmod(uint64(w))
		over = u128{0, uint64(w) - rem}
	}
	return over.ceil(uint64(n))
}

// leakyBucket is nginx's limit_req without nodelay, on a GCRA TAT: requests
// leave at n per w; one that arrives while others are ahead waits its turn
// (the step's delay, rounded up to the nanosecond), unless that wait would
// exceed maxDelay or more than depth requests are ahead (depth 0: no bound
// but maxDelay). Depth B thus admits B+1 requests back to back, the last
// one delayed B×w/n. A request of more than n units never passes.
// State: a, b = the time the queue is empty again (TAT).
func leakyBucket(s *step, a, b uint64, now, w, n, depth, maxDelay, cost int64) {
	x := backlog(a, b, now, n)
	limit := mul(uint64(min(maxDelay, maxSpan)), uint64(n))
	if depth > 0 {
		limit = min128(limit, tolerance(depth, w, n))
	}
	if cost > n {
		*s = step{quota: leakyQuota(n, w, limit, x), retry: w, never: true}
		return
	}
	if limit.less(x) {
		*s = step{quota: leakyQuota(n, w, limit, x), retry: x.sub(limit).ceil(uint64(n))}
		return
	}
	next := x.add(mul(uint64(cost), uint64(w)))
	a, b, empty := tatAfter(now, next, n)
	*s = step{ok: true, a: a, b: b, delay: x.ceil(uint64(n)), quota: newQuota(n, w, queueRoom(w, limit, next), empty, queueNext(limit, next, w, n))}
}

// leakyQuota reports a leaky bucket x ahead of now: how many more one-unit
// requests it may queue, and the time until the queue is empty.
func leakyQuota(n, w int64, limit, x u128) Quota {
	return newQuota(n, w, queueRoom(w, limit, x), x.ceil(uint64(n)), queueNext(limit, x, w, n))
}

// queueNext is a leaky bucket's effective window: how long, if the key
// queued the requests it has room for, until the queue had room for one
// more: the room-th request leaves the backlog past limit, by
// w − (limit−x) mod w (or by x − limit with no room).
func queueNext(limit, x u128, w, n int64) int64 {
	if limit.less(x) {
		return x.sub(limit).ceil(uint64(n))
	}
	_, rem := limit.sub(x).divmod(uint64(w))
	return int64(uint64(w)-rem+uint64(n)-1) / n
}

// queueRoom is how many more one-unit requests a leaky bucket x ahead of
// now may queue.
func queueRoom(w int64, limit, x u128) int64 {
	if limit.less(x) {
		return 0
	}
	return limit.sub(x).div(uint64(w)) + 1
}
