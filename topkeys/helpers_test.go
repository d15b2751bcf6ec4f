package topkeys

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// mkey is a key as a Sketch identifies it: its first MaxKeyLen bytes, and
// whether there were more.
type mkey struct {
	key   string
	trunc bool
}

// raw is a key that the Sketch identifies as k.
func (k mkey) raw() string {
	if k.trunc {
		return k.key + "~"
	}
	return k.key
}

func norm(key string) mkey {
	if len(key) > MaxKeyLen {
		return mkey{key[:MaxKeyLen], true}
	}
	return mkey{key, false}
}

// model is the exact weight of every key since its last Reset, and the
// total, both saturating like the Sketch.
type model struct {
	w     map[mkey]uint64
	total uint64
}

func newModel() *model { return &model{w: map[mkey]uint64{}} }

func (m *model) add(key string, w uint64) {
	k := norm(key)
	m.w[k] = satAdd(m.w[k], w)
	m.total = satAdd(m.total, w)
}

func (m *model) reset(key string) { delete(m.w, norm(key)) }

// checkInvariants verifies the internal structure of every shard: the
// bucket list, the slots of each bucket, the free list, the index, the
// floor.
func checkInvariants(t testing.TB, s *Sketch) {
	t.Helper()
	if err := invariants(s); err != nil {
		t.Fatal(err)
	}
}

func invariants(s *Sketch) error {
	for si := range s.shards {
		sh := &s.shards[si]
		sh.mu.Lock()
		err := sh.invariants(s)
		sh.mu.Unlock()
		if err != nil {
			return fmt.Errorf("shard %d: %v", si, err)
		}
	}
	return nil
}

func (sh *shard) invariants(s *Sketch) error {
	k := len(sh.slots)
	// The buckets: ascending counts, none empty, their slots linked both
	// ways and pointing back.
	inBucket := 0
	prevB, last := int32(none), uint64(0)
	for b := sh.minB; b != none; prevB, b = b, sh.buckets[b].next {
		bk := &sh.buckets[b]
		if bk.prev != prevB {
			return fmt.Errorf("bucket %d: prev %d, want %d", b, bk.prev, prevB)
		}
		if prevB != none && bk.count <= last {
			return fmt.Errorf("bucket %d: count %d after %d", b, bk.count, last)
		}
		last = bk.count
		if bk.first == none {
			return fmt.Errorf("bucket %d is empty", b)
		}
		prevS := int32(none)
		for i := bk.first; i != none; prevS, i = i, sh.slots[i].next {
			sl := &sh.slots[i]
			if sl.bucket != b || sl.prev != prevS {
				return fmt.Errorf("slot %d: bucket %d prev %d, want %d, %d", i, sl.bucket, sl.prev, b, prevS)
			}
			if bk.count < sl.err || sl.err > sh.floor || bk.count < sh.floor {
				return fmt.Errorf("slot %d: count %d err %d floor %d", i, bk.count, sl.err, sh.floor)
			}
			key := string(sh.appendKey(nil, int(i)))
			if sl.trunc {
				key += "~"
			}
			var hk hkey
			s.prepare(&hk, key)
			if uint32(hk.h) != sl.hash || hk.w0 != sl.w0 || hk.w1 != sl.w1 {
				return fmt.Errorf("slot %d (%q): stored hash or words differ", i, key)
			}
			if got := sh.find(&hk); got != int(i) {
				return fmt.Errorf("slot %d (%q) found at %d", i, key, got)
			}
			if inBucket++; inBucket > k {
				return fmt.Errorf("a bucket's slots loop")
			}
		}
	}
	free := 0
	for i := sh.freeS; i != none; i = sh.slots[i].next {
		if sh.slots[i].bucket != none {
			return fmt.Errorf("free slot %d has bucket %d", i, sh.slots[i].bucket)
		}
		if free++; free > k {
			return fmt.Errorf("the free slots loop")
		}
	}
	if free+inBucket != k {
		return fmt.Errorf("%d free slots and %d used of %d", free, inBucket, k)
	}
	used := 0
	for _, e := range sh.index {
		if e.slot != 0 {
			used++
		}
	}
	if used != inBucket {
		return fmt.Errorf("index holds %d, buckets %d", used, inBucket)
	}
	return nil
}

// checkGuarantees verifies the Space-Saving bounds against m: every
// tracked key has true ≤ Count ≤ true+Error, Top's order, Total, and no
// key heavier than its shard's floor (or than Total/k) is missing.
func checkGuarantees(t testing.TB, s *Sketch, m *model) {
	t.Helper()
	if err := guarantees(s, m); err != nil {
		t.Fatal(err)
	}
}

func guarantees(s *Sketch, m *model) error {
	if err := invariants(s); err != nil {
		return err
	}
	if got := s.Total(); got != m.total {
		return fmt.Errorf("Total = %d, want %d", got, m.total)
	}
	top := s.Top(0)
	tracked := map[mkey]bool{}
	for i, e := range top {
		k := mkey{e.Key, e.Truncated}
		if tracked[k] {
			return fmt.Errorf("%q listed twice", e.Key)
		}
		tracked[k] = true
		w := m.w[k]
		if e.Count < w || e.Count-e.Error > w {
			return fmt.Errorf("%q: true %d, Count %d, Error %d", e.Key, w, e.Count, e.Error)
		}
		if e.Error > e.Count {
			return fmt.Errorf("%q: Error %d > Count %d", e.Key, e.Error, e.Count)
		}
		if i > 0 && !less(top[i-1], e) {
			return fmt.Errorf("Top out of order at %d: %+v then %+v", i, top[i-1], e)
		}
	}
	for _, n := range []int{1, 2, 3, len(top) / 2, len(top) - 1} {
		if n <= 0 || n >= len(top) {
			continue
		}
		if got := s.Top(n); !slices.Equal(got, top[:n]) {
			return fmt.Errorf("Top(%d) = %+v, want %+v", n, got, top[:n])
		}
	}
	slotsPerShard := uint64(s.Capacity() / len(s.shards))
	for k, w := range m.w {
		if tracked[k] || w == 0 {
			continue
		}
		var hk hkey
		s.prepare(&hk, k.raw())
		sh := s.shard(hk.h)
		sh.mu.Lock()
		floor, total := sh.floor, sh.total
		sh.mu.Unlock()
		if w > floor {
			return fmt.Errorf("untracked %q weighs %d > floor %d", k.key, w, floor)
		}
		// Error ≤ W/k holds until the total saturates.
		if m.total < math.MaxUint64 && (w > total/slotsPerShard || w > m.total/slotsPerShard) {
			return fmt.Errorf("untracked %q weighs %d > W/k", k.key, w)
		}
	}
	return nil
}

// less is Top's order: Count descending, then Key, then untruncated first.
func less(a, b Entry) bool {
	if a.Count != b.Count {
		return a.Count > b.Count
	}
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return !a.Truncated && b.Truncated
}
