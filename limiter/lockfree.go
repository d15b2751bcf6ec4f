package limiter

import (
	"sync/atomic"
	"time"
)

// A bucket rule (TokenBucket or LeakyBucket, one limit, no shares) keeps
// a key's state in one word that matters, the TAT in ns, with its
// fraction in a second word that is 0 whenever the limit's unit (w/n) is a
// whole number of ns and the decisions are unscaled. Such a Limiter is
// lock-free on a known key: allowFast finds the key without the shard's
// lock and takes its request with one compare-and-swap on the TAT. What
// the CAS cannot decide, it leaves to the locked path: a new key, a key
// unreferenced since the CLOCK hand passed or spent, a request it would
// deny or that would leave the key spent (so the spent-key rule and the
// spent count stay the locked path's), a scaled request, a fraction, a
// cost of 0.
//
// The table of such a Limiter is an atomic table (table.lf): the fast
// path reads it concurrently with the lock's holder, so
//
//   - every write of a record's words is atomic, and so is every read of
//     word 1 and word 2 but the lock holder's of word 2;
//   - word 1 holds the TAT xor the key's hash xor mixFraction(word 2): a
//     record moved into the slot of another key (a removal shifts
//     records back) holds another word than the key's, so a CAS that
//     found one key cannot land on another (short of a 2^-54 chance);
//   - the lock holder that reads, moves or removes a record first freezes
//     word 1 (swaps frozenWord in): a CAS under way fails, and the fast
//     path, seeing the frozen word, takes the lock. The lock holder's own
//     work is done on a copy (hold), written back after (put); a resize
//     leaves the old array frozen for good;
//   - the records' array is published through table.view.

// frozenWord in word 1 of a record of an atomic table: a lock holder is
// reading or moving it, or the slot is empty.
const frozenWord = 1<<64 - 1

// mixFraction is what word 2 (a TAT's fraction) adds into word 1: 0 for
// no fraction.
func mixFraction(b uint64) uint64 { return b * 0x9e3779b97f4a7c15 }

// recView is the records of an atomic table, as the fast path reads them.
type recView struct {
	recs []uint64 // stride 3
	mask uint64
}

// fastTries is how many times allowFast retries a CAS that another
// decision on the key beat, before it takes the lock.
const fastTries = 4

// lockFree reports whether a plan's keys fit the lock-free path.
func (p *plan) lockFree() bool {
	return (p.algo == TokenBucket || p.algo == LeakyBucket) && len(p.limits) == 1 &&
		p.stride == 3 && p.logs == 0 && p.shareW == 0
}

// allowFast decides an unscaled request of cost on the key of hash h in
// shard s, without the lock, if it can (see above): it reports whether it
// did, having filled *d (zero on entry) as the locked path would.
func allowFast(d *Decision, p *plan, h uint64, s *shard, now, cost int64) bool {
	lp := &p.limits[0]
	if lp.ub.unit == 0 || cost < 1 {
		return false
	}
	v := s.table.view.Load()
	if v == nil {
		return false
	}
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
		old := atomic.LoadUint64(&r[1])
		if old == frozenWord || atomic.LoadUint64(&r[2]) != 0 || atomic.LoadUint64(&r[0]) != w0 {
			return false
		}
		var st step
		ok = false
		switch p.algo {
		case TokenBucket:
			ok = cost <= lp.capacity && lp.ub.token(&st, old^h, now, lp.w, lp.n, cost)
		case LeakyBucket:
			ok = cost <= lp.n && lp.ub.leaky(&st, old^h, now, lp.w, lp.n, cost)
		}
		if !ok || st.quota.Remaining == 0 {
			return false
		}
		if atomic.CompareAndSwapUint64(&r[1], old, st.a^h) {
			d.Allowed, d.Len, d.Quotas[0], d.Delay = true, 1, st.quota, time.Duration(st.delay)
			return true
		}
	}
	return false
}

// find is the slot of hash h in v, read without the lock: it may miss a
// key that a removal is shifting back.
func (v *recView) find(h uint64) (int, bool) {
	i := (h >> 2) & v.mask
	for range v.mask + 1 {
		w := atomic.LoadUint64(&v.recs[i*3])
		if w&^flagBits == h {
			return int(i), true
		}
		if w == 0 {
			return 0, false
		}
		i = (i + 1) & v.mask
	}
	return 0, false
}

// hold is the words of slot i (which holds a record) for the lock's
// holder to read and change: the record itself, or in an atomic table a
// decoded copy in buf, word 1 frozen meanwhile. Put writes it back.
func (t *table) hold(i int, buf *[3]uint64) []uint64 {
	r := t.record(i)
	if !t.lf {
		return r
	}
	v := atomic.SwapUint64(&r[1], frozenWord)
	*buf = [3]uint64{r[0], v ^ (r[0] &^ flagBits) ^ mixFraction(r[2]), r[2]}
	return buf[:]
}

// put writes back words that hold returned for slot i, and unfreezes it.
func (t *table) put(i int, w []uint64) {
	if !t.lf {
		return
	}
	r := t.record(i)
	atomic.StoreUint64(&r[2], w[2])
	atomic.StoreUint64(&r[1], w[1]^(w[0]&^flagBits)^mixFraction(w[2]))
	if r[0] != w[0] {
		atomic.StoreUint64(&r[0], w[0])
	}
}

// snapshot is the words of slot i to read only, under the lock: the
// record itself, or in an atomic table a decoded copy in buf.
func (t *table) snapshot(i int, buf *[3]uint64) []uint64 {
	r := t.record(i)
	if !t.lf {
		return r
	}
	*buf = [3]uint64{r[0], atomic.LoadUint64(&r[1]) ^ (r[0] &^ flagBits) ^ mixFraction(r[2]), r[2]}
	return buf[:]
}

// setWord0 writes word 0 of slot i (atomically in an atomic table).
func (t *table) setWord0(i int, w uint64) {
	if t.lf {
		atomic.StoreUint64(&t.recs[i*t.stride], w)
		return
	}
	t.recs[i*t.stride] = w
}
