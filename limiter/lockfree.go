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

// fastTries is how many times allowFast retries a CAS that another
// decision on the key beat, before it takes the lock.
const fastTries = 4

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
// did, having filled *d (zero on entry) as the locked path would.
func allowFast(d *Decision, p *plan, h uint64, s *shard, now, cost int64) bool {
	lp := &p.limits[0]
	if cost < 1 {
		return false
	}
	v := s.table.view.Load()
	if v == nil {
		return false
	}
	c := s.table.cw
	for range fastTries {
		i, ok := v.find(h)
		if !ok {
			return false
		}
		r := v.recs[i*3 : i*3+3 : i*3+3]
		w0 := atomic.LoadUint64(&r[0])
		if w0&flagBits != refBit { // unreferenced, spent, or gone
			return false
		}
		old := atomic.LoadUint64(&r[c])
		other := atomic.LoadUint64(&r[3-c])
		if old == frozenWord || atomic.LoadUint64(&r[0]) != w0 {
			return false
		}
		x := old ^ h ^ mixWord(other)
		var st step
		var next uint64
		switch p.algo {
		case TokenBucket:
			ok = other == 0 && lp.ub.unit != 0 && cost <= lp.capacity && lp.ub.token(&st, x, now, lp.w, lp.n, cost)
			next = st.a
		case LeakyBucket:
			ok = other == 0 && lp.ub.unit != 0 && cost <= lp.n && lp.ub.leaky(&st, x, now, lp.w, lp.n, cost)
			next = st.a
		case SlidingWindow, FixedWindow:
			cur := p.starts.at(0, now, lp.w)
			if ok = int64(other) == cur; ok { // the key's window: its start stays
				if p.algo == SlidingWindow {
					slidingWindow(&st, other, x, now, cur, lp.w, lp.n, cost)
				} else {
					fixedWindow(&st, other, x, now, cur, lp.w, lp.n, cost)
				}
				ok = st.ok && st.a == other
			}
			next = st.b
		}
		if !ok || st.quota.Remaining == 0 {
			return false
		}
		if atomic.CompareAndSwapUint64(&r[c], old, next^h^mixWord(other)) {
			d.Allowed, d.Len, d.Quotas[0], d.Delay = true, 1, st.quota, time.Duration(st.delay)
			return true
		}
	}
	return false
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
