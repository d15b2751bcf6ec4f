package limiter

// tokenBucket is GCRA: the key's state is its theoretical arrival time
// (TAT, ns), the time at which its bucket is full again. A unit costs
// T = w/n; the bucket holds capacity units, a tolerance τ = capacity×T.
// State: a = TAT.
func tokenBucket(a uint64, now, w, n, capacity, cost int64) step {
	tat := max(int64(a), now)
	if cost > capacity {
		return step{quota: newQuota(n, w, unitsIn(now+span(capacity, w, n)-tat, w, n), tat-now), retry: w}
	}
	tau := span(capacity, w, n)
	next := tat + span(cost, w, n)
	if next-now > tau {
		return step{quota: newQuota(n, w, unitsIn(now+tau-tat, w, n), tat-now), retry: next - tau - now}
	}
	return step{ok: true, a: uint64(next), quota: newQuota(n, w, unitsIn(now+tau-next, w, n), next-now)}
}

// leakyBucket is nginx's limit_req without nodelay, on a GCRA timestamp:
// requests leave at n per w; one that arrives while others are ahead waits
// its turn (the step's delay), unless that wait would exceed maxDelay or
// more than depth requests are ahead (depth 0: no bound but maxDelay).
// State: a = the time the queue is empty again (TAT).
func leakyBucket(a uint64, now, w, n, depth, maxDelay, cost int64) step {
	tat := max(int64(a), now)
	limit := maxDelay
	if depth > 0 {
		limit = min(limit, span(depth, w, n))
	}
	wait := tat - now
	if wait > limit {
		return step{quota: newQuota(n, w, 0, wait), retry: wait - limit}
	}
	next := tat + span(cost, w, n)
	return step{ok: true, a: uint64(next), delay: wait, quota: newQuota(n, w, queueRoom(next-now, limit, w, n), next-now)}
}

// queueRoom is how many more one-unit requests a leaky bucket whose next
// request would wait `wait` can still queue.
func queueRoom(wait, limit, w, n int64) int64 {
	if wait > limit {
		return 0
	}
	return unitsIn(limit-wait, w, n) + 1
}

// refundBucket moves a TAT back by what cost units took, never before now.
func refundBucket(a uint64, now, w, n, cost int64) uint64 {
	tat := int64(a)
	if tat <= now {
		return a
	}
	return uint64(max(tat-span(cost, w, n), now))
}
