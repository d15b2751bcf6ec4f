package limiter

import (
	"sync/atomic"
	"time"
)

// A rule of one limit, no burst bucket, no shares and an algorithm of two
// state words (every one but SlidingLog) keeps a key's state in a record
// of three words: the hash, then two state words of which a request
// usually changes one. A bucket's TAT changes and its fraction stays 0
// (when the unit w/n is a whole number of ns and the decision unscaled);
// a window's counts change and its start stays put (until the first
// request of the next window). Such a Limiter is lock-free on a known
// key: allowFast finds the key without the shard's lock and takes its
// request with one compare-and-swap on that word, the CAS word (cw). What
// the CAS cannot decide, it leaves to the locked path: a new key, a key
// unreferenced since the CLOCK hand passed or spent, a request it would
// deny or that would leave the key spent (so the spent-key rule and the
// spent count stay the locked path's), a request that changes the other
// word (a fraction, a new window), a scaled request, a cost of 0.
//
// The table of such a Limiter is an atomic table (table.cw ≠ 0): the fast
// path reads it concurrently with the lock's holder, so
//
//   - every write of a record's words is atomic, and so is every read of
//     word cw and of the other state word, but the lock holder's of the
//     other word;
//   - word cw holds its value xor the key's hash xor mixWord(the other
//     word): a record moved into the slot of another key (a removal
//     shifts records back) holds another word than the key's, and so
//     does a record whose other word changed, so a CAS that read one
//     key's state cannot land on another key's or on other state (short
//     of a 2^-54 chance);
//   - the lock holder that reads, moves or removes a record first freezes
//     word cw (swaps frozenWord in): a CAS under way fails, and the fast
//     path, seeing the frozen word, takes the lock. The lock holder's
//     own work is done on a copy (hold), written back after (put), the
//     other word first; a resize leaves the old array frozen for good;
//   - the fast path reads word cw before the other word, and word 0
//     again after both;
//   - the records' array is published through table.view.

// frozenWord in word cw of a record of an atomic table: a lock holder is
// reading or moving it, or the slot is empty.
const frozenWord = 1<<64 - 1

// mixWord is what the other state word adds into word cw: 0 for 0.
func mixWord(o uint64) uint64 { return o * 0x9e3779b97f4a7c15 }

// recView is the records of an atomic table, as the fast path reads them.
type recView struct {
	recs []uint64 // stride 3
	ring ring
}

// fastTries is how many CASes allowFast tries before it takes the lock.
// A lost CAS means another decision on the key is under way; the lock
// then serialises them, and its holder freezes the key's word, so the
// others take the lock too and the key's decisions run back to back on
// one core, the record's cache line staying there, until the contention
// passes. Retrying the CAS instead moves that line between the cores
// twice a try (a load, then the CAS), and loses again about one time in
// three. Two Ps on one hot key (integration/bench, this repository's
// 2-core Intel VM, 2026-12-01, alternated): 1 try 42–50 ns/op for every
// CAS algorithm, 2 tries 55–102, 64 tries 78–109, uber-ratelimit (a
// load and a CAS, retried) 70–90. An earlier session, on an AMD VM,
// had 64 tries at 50 and 4 at 60–85; 1 was not measured there. Counted
// (build tag limiterstats) on a 2-core AMD VM under a load average of
// 11–17 (2026-12-04): 10^-6 to 3×10^-3 decisions a lost CAS or a frozen
// word, each lock wait 8–12 µs on average (a holder off its core), in
// all 1.5–5% of the deciding goroutines' time; 4 tries alternated with 1
// measured no different (72–102 ns/op both).
const fastTries = 1

// fastOutcome is why a call of allowFast left its decision to the lock,
// or that the locked path then waited for it: counted under the build tag
// limiterstats (faststats_on.go), to see where a hot key's decisions go.
// (What the CAS decided is not counted: a shared counter would be one
// more contended line on every decision.)
type fastOutcome uint8

const (
	fastLost    fastOutcome = iota // the CAS lost to another decision on the key: to the lock
	fastFrozen                     // a lock holder had frozen the key's word: to the lock
	fastNotFast                    // not for the CAS (a new key, a denial, a new window…): to the lock
	lockWaited                     // the locked path waited for the shard's lock
	fastOutcomes
)

// lockFreeWord is the CAS word of p's records if its keys fit the
// lock-free path, else 0.
func (p *plan) lockFreeWord() int {
	if len(p.limits) != 1 || p.stride != 3 || p.logs != 0 || p.shareW != 0 || p.burstW != 0 {
		return 0
	}
	switch p.algo {
	case TokenBucket, LeakyBucket:
		return p.limits[0].word // the TAT
	case SlidingWindow, FixedWindow:
		return p.limits[0].word + 1 // the counts
	}
	return 0
}

// allowFast decides an unscaled request of cost on the key of hash h in
// shard s, without the lock, if it can (see above): it reports whether it
// did, having filled *d (zero on entry) as the locked path would, but for
// the quota if quotas is false (d.Len stays 0).
//
// Between its read of word cw and its CAS it only decides whether the
// request fits and leaves a unit (admit): the shorter that span, the
// fewer CASes another decision on the key beats. The quota is computed
// after the CAS, by the algorithm's own step on the state the CAS
// replaced, as the locked path would have computed it.
func allowFast(d *Decision, p *plan, h uint64, s *shard, now, cost int64, quotas bool) bool {
	lp := &p.limits[0]
	if cost < 1 {
		fastCount(fastNotFast)
		return false
	}
	v := s.table.view.Load()
	if v == nil {
		fastCount(fastNotFast)
		return false
	}
	c := s.table.cw
	var cur int64 // the window's start, for the window algorithms
	if p.algo == SlidingWindow || p.algo == FixedWindow {
		cur = p.windowStart(0, now)
	}
	for range fastTries {
		i, ok := v.find(h)
		if !ok {
			fastCount(fastNotFast)
			return false
		}
		r := v.recs[i*3 : i*3+3 : i*3+3]
		w0 := atomic.LoadUint64(&r[0])
		if w0&flagBits != usedBits { // unreferenced, unsnapshotted, spent, or gone
			fastCount(fastNotFast)
			return false
		}
		old := atomic.LoadUint64(&r[c])
		other := atomic.LoadUint64(&r[3-c])
		if old == frozenWord || atomic.LoadUint64(&r[0]) != w0 {
			fastCount(fastFrozen)
			return false
		}
		x := old ^ h ^ mixWord(other)
		var st step
		next, delay, ran, ok := admit(&st, p, lp, other, x, now, cur, cost)
		if !ok {
			fastCount(fastNotFast)
			return false
		}
		if atomic.CompareAndSwapUint64(&r[c], old, next^h^mixWord(other)) {
			d.Allowed, d.Delay = true, time.Duration(delay)
			if quotas {
				if !ran {
					fastStep(&st, p, lp, other, x, now, cur, cost)
				}
				q := &d.Quotas[0]
				q.Limit, q.Window, q.Remaining, q.Reset, q.Effective = st.quota.Limit, st.quota.Window, st.quota.Remaining, st.quota.Reset, st.quota.Effective
				d.Len = 1
			}
			return true
		}
	}
	fastCount(fastLost)
	return false
}

// admit is whether a request of cost on the key whose CAS word decodes to
// x and whose other word is other fits, is taken as the algorithm's step
// would take it, leaves the key a unit (not spent) and changes word cw
// only: if so, word cw's next value and the delay. It runs the step
// itself, into *st, only where the request's fit is not plain from the
// counts (a sliding window with a previous count), and reports ran: *st
// is then the quota's. Otherwise fastStep on the same state, run after,
// agrees with it (TestAdmitMatchesStep).
func admit(st *step, p *plan, lp *limitPlan, other, x uint64, now, cur, cost int64) (next uint64, delay int64, ran, ok bool) {
	switch p.algo {
	case TokenBucket:
		ub := &lp.ub
		if other != 0 || ub.unit == 0 || cost > lp.capacity || uint64(cost) > ub.maxCost {
			return 0, 0, false, false
		}
		b := ub.backlog(x, now)
		c := uint64(cost) * ub.unit                                   // at most limit: no overflow
		if b > ub.limit || c > ub.limit-b || ub.limit-b-c < ub.unit { // denied, or no unit left
			return 0, 0, false, false
		}
		return uint64(now) + b + c, 0, false, true
	case LeakyBucket:
		ub := &lp.ub
		if other != 0 || ub.unit == 0 || cost > lp.n {
			return 0, 0, false, false
		}
		b := ub.backlog(x, now)
		c := uint64(cost) * ub.unit         // at most w ≤ maxSpan: no overflow
		if b > ub.limit || c > ub.limit-b { // denied, or no room left after
			return 0, 0, false, false
		}
		return uint64(now) + b + c, int64(b), false, true
	case FixedWindow:
		if int64(other) != cur || cost >= lp.n-int64(x) { // a new window, or no unit left
			return 0, 0, false, false
		}
		return x + uint64(cost), 0, false, true
	case SlidingWindow:
		if int64(other) != cur { // a new window: its start changes
			return 0, 0, false, false
		}
		if x>>32 == 0 { // no previous count: the estimate is curr
			if cost >= lp.n-int64(x) { // no unit left, or denied
				return 0, 0, false, false
			}
			return x + uint64(cost), 0, false, true
		}
		slidingWindow(st, other, x, now, cur, lp.w, lp.n, cost)
		if !st.ok || st.a != other || st.quota.Remaining == 0 {
			return 0, 0, false, false
		}
		return st.b, 0, true, true
	}
	return 0, 0, false, false
}

// fastStep is the algorithm's step for a request that admit took, on the
// state it took it from: the quota to report.
func fastStep(st *step, p *plan, lp *limitPlan, other, x uint64, now, cur, cost int64) {
	switch p.algo {
	case TokenBucket:
		lp.ub.token(st, x, now, lp.w, lp.n, cost)
	case LeakyBucket:
		lp.ub.leaky(st, x, now, lp.w, lp.n, cost)
	case FixedWindow:
		_, w := p.window(0, now) // a calendar period's own length
		fixedWindow(st, other, x, now, cur, w, lp.n, cost)
	case SlidingWindow:
		slidingWindow(st, other, x, now, cur, lp.w, lp.n, cost)
	}
}

// find is the slot of hash h in v, read without the lock: it may miss a
// key that a removal is shifting back.
func (v *recView) find(h uint64) (int, bool) {
	i := v.ring.home(h)
	for range v.ring.n {
		w := atomic.LoadUint64(&v.recs[i*3])
		if w&^flagBits == h {
			return int(i), true
		}
		if w == 0 {
			return 0, false
		}
		i = v.ring.next(i)
	}
	return 0, false
}

// hold is the words of slot i (which holds a record) for the lock's
// holder to read and change: the record itself, or in an atomic table a
// decoded copy in buf, word cw frozen meanwhile. Put writes it back.
func (t *table) hold(i int, buf *[3]uint64) []uint64 {
	r := t.record(i)
	c := t.cw
	if c == 0 {
		return r
	}
	v := atomic.SwapUint64(&r[c], frozenWord)
	buf[0], buf[3-c] = r[0], r[3-c] // word cw is read atomically only
	buf[c] = v ^ (r[0] &^ flagBits) ^ mixWord(r[3-c])
	return buf[:]
}

// put writes back words that hold returned for slot i, and unfreezes it.
func (t *table) put(i int, w []uint64) {
	c := t.cw
	if c == 0 {
		return
	}
	r := t.record(i)
	atomic.StoreUint64(&r[3-c], w[3-c])
	atomic.StoreUint64(&r[c], w[c]^(w[0]&^flagBits)^mixWord(w[3-c]))
	if r[0] != w[0] {
		atomic.StoreUint64(&r[0], w[0])
	}
}

// snapshot is the words of slot i to read only, under the lock: the
// record itself, or in an atomic table a decoded copy in buf.
func (t *table) snapshot(i int, buf *[3]uint64) []uint64 {
	r := t.record(i)
	c := t.cw
	if c == 0 {
		return r
	}
	buf[0], buf[3-c] = r[0], r[3-c]
	buf[c] = atomic.LoadUint64(&r[c]) ^ (r[0] &^ flagBits) ^ mixWord(r[3-c])
	return buf[:]
}

// setWord0 writes word 0 of slot i (atomically in an atomic table).
func (t *table) setWord0(i int, w uint64) {
	if t.cw != 0 {
		atomic.StoreUint64(&t.recs[i*t.stride], w)
		return
	}
	t.recs[i*t.stride] = w
}
