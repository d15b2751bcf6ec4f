package limiter

import (
	"math"
	"time"
)

// A give-back returns units to the state they were taken from, never to
// a later one: a request that reserved units (count_status, cost_header)
// may end long after, when the key's window has rolled or its bucket has
// refilled, and a give-back at that time into the state then in force
// would pass units the limit never had (issue 36: six failed logins in
// one window of limit 3). What Refund gives back, per algorithm, of a
// decision made at Taken.At:
//
//   - FixedWindow: the units, if the key is still in the window that held
//     Taken.At; else nothing (that window's count is gone).
//   - SlidingWindow: the units, from the current count if the key is
//     still in the window that held Taken.At, from the previous count if
//     it has moved on one window since; nothing once that window has
//     left both counts.
//   - SlidingLog: the oldest units at or after Taken.At, if it is still
//     in the window: the reservation's own event's (or, if time went
//     backwards, those of an earlier admission stamped later); never a
//     later admission's.
//   - TokenBucket, LeakyBucket (and the burst bucket in front of a
//     window): the TAT moves back by what the units cost (cost×W/N) less
//     the refill since Taken.At, never before now: the bucket never holds
//     more than it would had the units never been taken (the refill since
//     may have absorbed them: a TAT that fell behind the clock after the
//     reservation lost them). A reservation older than cost×W/N gives
//     nothing back.
//
// A give-back at the decision's time (a later rule denied the request)
// restores exactly what the decision took. Given back so, the units a key
// kept are a sequence its limits would have admitted alone: each
// algorithm's bound on any span of one window (doc.go) holds for them.

// Taken is what an allowed decision took of a key: Cost units at Scale
// (the scale AllowScaledAt used; 1 for AllowAt), at the decision's time
// At. Refund gives it back.
type Taken struct {
	At    time.Time
	Cost  int64
	Scale float64
}

// Refund gives back what an allowed decision on key took (t), at now:
// what of it the state the units were taken from still holds, as above.
// Use it when a later rule denies the request (now is then t.At), or when
// a request's response takes fewer units than it reserved. It never
// creates a key.
func (l *Limiter) Refund(key string, t Taken, now time.Time) {
	p := l.plan.Load()
	l.atKey(key, func(tb *table, slot int) {
		var buf [3]uint64
		w := tb.hold(slot, &buf)
		w[0] |= dirtyBit
		p.refund(w, tb.logsAt(slot), t.At.UnixNano(), now.UnixNano(), t.Cost, t.Scale)
		tb.put(slot, w)
	})
}

// refund gives back cost units that decide took at took, at now.
func (p *plan) refund(words []uint64, logs []eventLog, took, now, cost int64, scale float64) {
	if p.shareW != 0 {
		scale *= shareOf(words[p.shareW])
	}
	if scale <= 0 || math.IsNaN(scale) || cost <= 0 {
		return
	}
	for i, lp := range p.limits {
		if p.algo == SlidingLog {
			logs[lp.word].giveBack(took, now, lp.w, cost)
			continue
		}
		a, b := &words[lp.word], &words[lp.word+1]
		switch p.algo {
		case SlidingWindow:
			*b = refundSlidingWindow(*a, *b, p.slidingTook(*a, took, lp.w), lp.w, cost)
		case FixedWindow:
			*b = refundFixedWindow(*a, *b, p.windowStart(i, took), cost)
		case TokenBucket, LeakyBucket:
			w, n := p.bucketRate(&lp, scale)
			*a, *b = refundBucket(*a, *b, took, now, w, n, cost)
		}
	}
	if p.burstW != 0 {
		lp := p.limits[p.burstAt]
		words[p.burstW], words[p.burstW+1] = refundBucket(words[p.burstW], words[p.burstW+1], took, now, lp.w, scaled(lp.n, scale), cost)
	}
}

// refundFixedWindow is the count b of a fixed window starting at a, cost
// units taken in the window starting at took (the one that held the
// decision's time: plan.windowStart) given back: only if that is a.
func refundFixedWindow(a, b uint64, took, cost int64) uint64 {
	if int64(a) != took { // a window past, or one the key has moved on to
		return b
	}
	return b - min(b, uint64(cost))
}

// slidingTook is the start of the window that held took for a sliding
// window's state a: the epoch-aligned window, or, anchored, the key's
// window if took falls in it or the one before (the key has since moved
// on); else one that matches neither.
func (p *plan) slidingTook(a uint64, took, w int64) int64 {
	if p.shareW == 0 {
		return alignDown(took, w)
	}
	switch start := int64(a); {
	case took >= start && took < start+w:
		return start
	case took >= start-w && took < start:
		return start - w
	}
	return math.MinInt64
}

// refundSlidingWindow is the counts b of a sliding window whose current
// window starts at a, cost units taken in the window starting at took
// (slidingTook) given back: from the current count or, if the key has
// since moved on one window, from the previous one; else nothing.
func refundSlidingWindow(a, b uint64, took, w, cost int64) uint64 {
	switch int64(a) {
	case took: // still the current count
		curr := b & math.MaxUint32
		return b&^math.MaxUint32 | (curr - min(curr, uint64(cost)))
	case took + w: // the key has moved on a window: the units are in prev
		prev := b >> 32
		return (prev-min(prev, uint64(cost)))<<32 | b&math.MaxUint32
	}
	return b
}

// refundBucket moves a TAT back by what cost units took at took, less the
// refill since (now−took), never before now.
func refundBucket(a, b uint64, took, now, w, n, cost int64) (uint64, uint64) {
	x := backlog(a, b, now, n)
	give := mul(uint64(cost), uint64(w))
	if now > took {
		give = give.sub(mul(uint64(now-took), uint64(n)))
	}
	if x.isZero() || give.isZero() {
		return a, b
	}
	a, b, _ = tatAfter(now, x.sub(give), n)
	return a, b
}

// giveBack takes cost units back, at now, for an admission at took: the
// oldest units at or after took, if took is still in the window. They are
// the admission's own (in the event at took), or, if time went backwards
// (a request whose decision came after a later-stamped one's was placed
// at the newest event's time), units of an admission made before it and
// stamped later, while its own stay, later still: the log is then never
// laxer than had the admission not been made. Never a later admission's
// units, which issue 36's give-back took (the newest). A took that has
// left the window gives nothing: its units, if any are left, leave with
// it. Emptied events leave the log, but the newest keeps its time, in an
// event of no units: events that the refunded request expired are gone,
// so a request that comes back in time must still be judged at the later
// time, or it would find them missing.
func (l *eventLog) giveBack(took, now, w, cost int64) {
	if l.n == 0 || took <= max(now, l.newest())-w {
		return // expired
	}
	first := l.n
	for first > 0 && l.at(first-1).at >= took {
		first--
	}
	for i := first; i < l.n && cost > 0; i++ {
		e := l.at(i)
		k := min(cost, e.units)
		e.units -= k
		l.total -= k
		cost -= k
	}
	kept := first // compact: emptied events leave, but the newest
	for i := first; i < l.n; i++ {
		if e := *l.at(i); e.units > 0 || i == l.n-1 {
			*l.at(kept) = e
			kept++
		}
	}
	l.n = kept
}
