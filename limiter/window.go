package limiter

import "math"

// fixedWindow counts units in windows of length w aligned to the Unix
// epoch. State: a = the window's start (ns), b = units taken in it. Cur
// is alignDown(now, w).
func fixedWindow(s *step, a, b uint64, now, cur, w, n, cost int64) {
	start, count := int64(a), int64(b)
	if cur < start { // time went backwards: stay in the later window
		cur = start
	}
	if cur != start {
		count = 0
	}
	end := cur + w - now
	if count+cost > n {
		retry := end
		if cost > n {
			retry = w
		}
		*s = step{quota: newQuota(n, w, n-count, end, end), retry: retry, never: cost > n}
		return
	}
	count += cost
	*s = step{ok: true, a: uint64(cur), b: uint64(count), quota: newQuota(n, w, n-count, end, end)}
}

// refundFixedWindow gives back cost units taken in the window that starts
// at cur (the one holding the decision's time), if the key is still in
// it: units of a window already past are gone anyway.
func refundFixedWindow(a, b uint64, cur, cost int64) (uint64, uint64) {
	if int64(a) != cur { // a window past, or one the key has moved on to
		return a, b
	}
	return a, b - min(b, uint64(cost))
}

// slidingWindow estimates the units of the last w as
// prev×(1−elapsed/w)+curr, from the counts of the current and the previous
// epoch-aligned windows. State: a = the current window's start (ns),
// b = prev<<32 | curr. The estimate is compared exactly, in w-ths of a
// unit on 128 bits, so RetryAfter is exact for it: a request made
// RetryAfter later passes, one made a nanosecond earlier does not. Cur is
// alignDown(now, w).
func slidingWindow(s *step, a, b uint64, now, cur, w, n, cost int64) {
	slidingEstimate(s, a, b, now, cur, w, n, cost, 0)
}

// slidingShared is slidingWindow under Config.Shares: cur is the key's
// own window's start (keyWindow), and the estimate is
// ⌊prev×(1−elapsed/w)⌋+curr, prev's weighed part rounded down. Exact, a
// window kept at its limit by requests at random admits n−1 a window,
// not n: at the window's last request prev still weighs about half a
// request's share of it, and the estimate leaves that unit unused (n =
// 20, 2×n asked: 0.946×n a second; a node of five, each with a fifth of
// L, loses 5% of L). Rounded down, it admits n, and any span of w at most
// 2n (2n−1 exact) to a client bursting at an edge.
func slidingShared(s *step, a, b uint64, now, cur, w, n, cost int64) {
	slidingEstimate(s, a, b, now, cur, w, n, cost, w-1)
}

// slidingEstimate is slidingWindow where the estimate×w may reach
// n×w+slack (slack < w: the estimate's fraction rounded down, if w−1).
func slidingEstimate(s *step, a, b uint64, now, cur, w, n, cost, slack int64) {
	start := int64(a)
	if cur < start { // time went backwards: stay in the later window
		cur = start
	}
	var prev, curr int64
	switch {
	case start >= cur:
		prev, curr = int64(b>>32), int64(uint32(b))
	case start >= cur-w:
		prev = int64(uint32(b))
	}
	if prev == 0 && curr+cost <= n {
		// nothing to weigh: the estimate is curr, and the request fits;
		// taking the rest would make it n, and one more fits once curr's
		// weight has fallen by a unit in the next window (slidingNext;
		// rounded down, 1 ns into it)
		curr += cost
		next := ceilDiv(w, n)
		if slack != 0 {
			next = 1
		}
		*s = step{ok: true, a: uint64(cur), b: uint64(curr),
			quota: newQuota(n, w, n-curr, slidingReset(cur, w, now, 0, curr), cur+w-now+next)}
		return
	}
	elapsed := max(now-cur, 0)
	// used×w = prev×(w−elapsed) + curr×w
	used := mul(uint64(prev), uint64(w-elapsed)).add(mul(uint64(curr), uint64(w)))
	limit := mul(uint64(n), uint64(w))
	if slack != 0 {
		limit = limit.add(u128{0, uint64(slack)})
	}
	after := used.add(mul(uint64(cost), uint64(w)))
	if limit.less(after) {
		r := limit.sub(used).div(uint64(w))
		*s = step{
			quota: newQuota(n, w, r, slidingReset(cur, w, now, prev, curr), slidingNext(now, cur, w, n, prev, curr, r, slack)),
			retry: slidingRetry(now, cur, w, n, prev, curr, cost, slack),
			never: cost > n,
		}
		return
	}
	curr += cost
	r := limit.sub(after).div(uint64(w))
	*s = step{
		ok:    true,
		a:     uint64(cur),
		b:     uint64(prev)<<32 | uint64(curr),
		quota: newQuota(n, w, r, slidingReset(cur, w, now, prev, curr), slidingNext(now, cur, w, n, prev, curr, r, slack)),
	}
}

// slidingNext is a sliding window's effective window: how long, if the
// key took its r remaining units now, until one more would fit (as prev's
// weight falls, or in the next window).
func slidingNext(now, cur, w, n, prev, curr, r, slack int64) int64 {
	return slidingRetry(now, cur, w, n, prev, curr+r, 1, slack)
}

// slidingReset is how long until both windows' counts have aged out.
func slidingReset(cur, w, now, prev, curr int64) int64 {
	switch {
	case curr > 0:
		return cur + 2*w - now
	case prev > 0:
		return cur + w - now
	}
	return 0
}

// slidingRetry is how long until cost units fit, if nothing else is taken:
// later in this window as prev's weight falls, or in the next one, where
// curr becomes the decaying previous count (slack as slidingEstimate's).
func slidingRetry(now, cur, w, n, prev, curr, cost, slack int64) int64 {
	if cost > n {
		return w
	}
	room := n - cost // the request fits once the estimate is ≤ room
	if curr <= room && prev > 0 {
		// prev×(w−e) ≤ (room−curr)×w+slack  ⇔  e ≥ w − ⌊((room−curr)×w+slack)/prev⌋
		e := w - mul(uint64(room-curr), uint64(w)).add(u128{0, uint64(slack)}).div(uint64(prev))
		if e < w {
			return max(cur+e-now, 1)
		}
	}
	next := cur + w - now
	var e int64
	if curr > room { // curr×(w−e) ≤ room×w+slack  ⇔  e ≥ w − ⌊(room×w+slack)/curr⌋
		e = w - mul(uint64(room), uint64(w)).add(u128{0, uint64(slack)}).div(uint64(curr))
	}
	return max(next+e, 1)
}

// keyWindow is the start of the window in force at now of a sliding
// window whose windows start at the key's first unit (anchored: under
// Config.Shares), not at the epoch's multiples: a key has the window of
// its state (a), the next one if it had units in it, or, with none in
// the last window, starts anew at now, a window starting there.
//
// A sliding window counts a key's first window as spread over all of it:
// where the windows are the epoch's, a key that starts f into a window and
// takes N there can take N×f/w more in the first w from its start, as the
// next window weighs those N as if some had been taken before the key
// started (a cluster's new key admitted 1.23–1.26×L in its first second,
// and a lone node 1.36×L, where f was 0.37 s of 1 s: issue 23). Anchored,
// the first window is the key's first w, so no span of w from its start
// admits more than N there, and the estimate is the seed formula's on the
// key's own windows.
func keyWindow(a, b uint64, now, w int64) int64 {
	start := int64(a)
	switch {
	case now < start+w: // the key's window (or time went backwards: stay in it)
		return start
	case now < start+2*w && uint32(b) != 0: // the next: curr becomes prev
		return start + w
	}
	return now
}

// slidingCur is the start of the window in force at now of limit i of a
// sliding window, its state being a and b: the key's own (anchored,
// keyWindow) under Config.Shares, else the epoch-aligned one.
func (p *plan) slidingCur(i int, a, b uint64, now int64) int64 {
	if p.shareW != 0 {
		return keyWindow(a, b, now, p.limits[i].w)
	}
	return p.starts.at(i, now, p.limits[i].w)
}

// slidingTook is the start of the window that held now for a sliding
// window's state a (of a decision made at about now): the epoch-aligned
// window, or, anchored, the key's window if now falls in it or the one
// before (the key has since moved on); else one that matches neither.
func (p *plan) slidingTook(a uint64, now, w int64) int64 {
	if p.shareW == 0 {
		return alignDown(now, w)
	}
	switch start := int64(a); {
	case now >= start && now < start+w:
		return start
	case now >= start-w && now < start:
		return start - w
	}
	return math.MinInt64
}

// refundSlidingWindow gives back cost units taken in the window that
// started at took (the one holding the decision's time, slidingTook):
// from the current count or, if the key has since moved on one window,
// from the previous one.
func refundSlidingWindow(a, b uint64, took, w, cost int64) (uint64, uint64) {
	switch int64(a) {
	case took: // still the current count
		curr := b & math.MaxUint32
		return a, b&^math.MaxUint32 | (curr - min(curr, uint64(cost)))
	case took + w: // the key has moved on a window: the units are in prev
		prev := b >> 32
		return a, (prev-min(prev, uint64(cost)))<<32 | b&math.MaxUint32
	}
	return a, b
}
