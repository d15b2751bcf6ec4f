package topkeys

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func wantTop(t *testing.T, s *Sketch, n int, want ...Entry) {
	t.Helper()
	got := s.Top(n)
	if len(want) == 0 {
		want = []Entry{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Top(%d) =\n  %+v\nwant\n  %+v", n, got, want)
	}
	checkInvariants(t, s)
}

func TestNewShards(t *testing.T) {
	for _, c := range []struct{ capacity, shards, slots int }{
		{-5, 1, 1}, {0, 1, 1}, {1, 1, 1}, {2, 1, 2}, {63, 1, 63},
		{64, 2, 64}, {100, 2, 100}, {127, 2, 128}, {128, 4, 128},
		{1000, 16, 1008}, {DefaultCapacity, 8, 256}, {1024, 16, 1024}, {1 << 16, 16, 1 << 16},
	} {
		s := New(c.capacity)
		if len(s.shards) != c.shards || s.Capacity() != c.slots {
			t.Errorf("New(%d): %d shards, Capacity %d; want %d, %d",
				c.capacity, len(s.shards), s.Capacity(), c.shards, c.slots)
		}
	}
}

func TestExactBelowCapacity(t *testing.T) {
	s := New(8) // one shard of 8: exact for up to 8 keys
	wantTop(t, s, 0)
	s.Add("a", 3)
	s.Add("b", 5)
	s.Add("c", 5)
	s.Add("d", 1)
	s.Add("a", 2)
	s.Add("", 4) // the empty key is a key
	all := []Entry{{"a", 5, 0, false}, {"b", 5, 0, false}, {"c", 5, 0, false}, {"", 4, 0, false}, {"d", 1, 0, false}}
	wantTop(t, s, 0, all...)
	wantTop(t, s, -1, all...)
	wantTop(t, s, 5, all...)
	wantTop(t, s, 100, all...)
	wantTop(t, s, 2, all[:2]...)
	wantTop(t, s, 1, all[0])
	if got := s.Total(); got != 20 {
		t.Fatalf("Total = %d, want 20", got)
	}
}

func TestExactShardedBelowCapacity(t *testing.T) {
	// 100 keys in 8 shards of 32: no shard fills (but with a chance below
	// one in a million), so counts are exact.
	s := New(DefaultCapacity)
	var want []Entry
	for i := range 100 {
		k := strings.Repeat("k", i+1)
		s.Add(k, uint64(1000-i))
		s.Add(k, 1)
		want = append(want, Entry{Key: k, Count: uint64(1001 - i)})
	}
	wantTop(t, s, 0, want...)
	wantTop(t, s, 10, want[:10]...)
}

func TestReplacement(t *testing.T) {
	s := New(2)
	s.Add("a", 5)
	s.Add("b", 3)
	s.Add("c", 1) // takes b's slot: 3+1, of which 3 may be b's
	wantTop(t, s, 0, Entry{"a", 5, 0, false}, Entry{"c", 4, 3, false})
	s.Add("b", 1) // takes c's slot (4 < 5)
	wantTop(t, s, 0, Entry{"a", 5, 0, false}, Entry{"b", 5, 4, false})
	s.Add("b", 2) // tracked: counted exactly from here
	wantTop(t, s, 0, Entry{"b", 7, 4, false}, Entry{"a", 5, 0, false})
	s.Add("c", 1) // takes a's slot
	wantTop(t, s, 0, Entry{"b", 7, 4, false}, Entry{"c", 6, 5, false})
	if got := s.Total(); got != 13 {
		t.Fatalf("Total = %d, want 13", got)
	}
}

func TestReset(t *testing.T) {
	s := New(4)
	s.Add("a", 10)
	s.Add("b", 5)
	s.Add("c", 1)
	s.Reset("b")
	s.Reset("zzz") // not tracked: nothing happens
	wantTop(t, s, 0, Entry{"a", 10, 0, false}, Entry{"c", 1, 0, false})
	s.Add("b", 2) // counted afresh; nothing was ever evicted, so exact
	wantTop(t, s, 0, Entry{"a", 10, 0, false}, Entry{"b", 2, 0, false}, Entry{"c", 1, 0, false})
	s.Reset("a")
	s.Reset("b")
	s.Reset("c")
	wantTop(t, s, 0)
	if got := s.Total(); got != 18 {
		t.Fatalf("Total = %d, want 18 (Reset keeps the total)", got)
	}

	// Once a shard has evicted, a key taking a freed slot inherits the
	// last evicted count, like one taking the lightest key's slot.
	s = New(2)
	s.Add("a", 5)
	s.Add("b", 3)
	s.Add("c", 1) // evicts b at 3
	s.Reset("a")
	wantTop(t, s, 0, Entry{"c", 4, 3, false})
	s.Add("b", 1) // b may have weighed 3 before: Count 4, Error 3
	wantTop(t, s, 0, Entry{"b", 4, 3, false}, Entry{"c", 4, 3, false})
	s.Reset("c")
	s.Reset("b")
	s.Add("x", 1)
	wantTop(t, s, 0, Entry{"x", 4, 3, false})
}

func TestResetMany(t *testing.T) {
	// Resets from buckets of one key and of several, at the start, middle
	// and end of the bucket list, then the freed slots taken again.
	s := New(32)
	for i := range 31 {
		s.Add(string(rune('A'+i)), uint64(i%5+1))
	}
	s.Add("solo", 100)
	// "`" and "nope" are not tracked.
	for _, k := range []string{"A", "Q", "Z", "B", "solo", "F", "K", "P", "U", "`", "nope"} {
		s.Reset(k)
		checkInvariants(t, s)
	}
	if got := len(s.Top(0)); got != 23 {
		t.Fatalf("%d tracked after 9 resets of 32, want 23", got)
	}
	for i := range 9 {
		s.Add(string(rune('a'+i)), 1)
		checkInvariants(t, s)
	}
	if got := len(s.Top(0)); got != 32 {
		t.Fatalf("%d tracked, want 32", got)
	}
}

func TestTruncatedKeys(t *testing.T) {
	prefix := strings.Repeat("x", MaxKeyLen)
	s := New(8)
	s.Add(prefix, 3)                          // exactly MaxKeyLen: kept whole
	s.Add(prefix+"a", 1)                      // longer: counted by its prefix
	s.Add(prefix+strings.Repeat("b", 300), 2) // same prefix, same entry
	s.Add("short", 1)
	wantTop(t, s, 0,
		Entry{Key: prefix, Count: 3},
		Entry{Key: prefix, Count: 3, Truncated: true},
		Entry{Key: "short", Count: 1},
	)
	s.Reset(prefix + "zzz") // resets the truncated entry only
	wantTop(t, s, 0, Entry{Key: prefix, Count: 3}, Entry{Key: "short", Count: 1})
}

func TestSaturation(t *testing.T) {
	const max = math.MaxUint64
	s := New(1)
	s.Add("a", max-1)
	s.Add("a", 5)
	wantTop(t, s, 0, Entry{"a", max, 0, false})
	s.Add("b", 1) // inherits a saturated count
	wantTop(t, s, 0, Entry{"b", max, max, false})
	s.Add("b", max)
	wantTop(t, s, 0, Entry{"b", max, max, false})
	if got := s.Total(); got != max {
		t.Fatalf("Total = %d, want %d", got, uint64(max))
	}
}

func TestWeightZero(t *testing.T) {
	s := New(1)
	s.Add("a", 0)
	wantTop(t, s, 0)
	s.Add("a", 2)
	s.Add("b", 0) // would replace a if it counted
	s.Add("a", 0)
	wantTop(t, s, 0, Entry{"a", 2, 0, false})
	if got := s.Total(); got != 2 {
		t.Fatalf("Total = %d, want 2", got)
	}
}

func TestTopCopies(t *testing.T) {
	s := New(1)
	s.Add("first", 1)
	top := s.Top(1)
	s.Add("other", 5) // overwrites the slot's key bytes
	if top[0].Key != "first" {
		t.Fatalf("Top's key changed to %q after Add", top[0].Key)
	}
}

func TestIndexRemoveShiftsBack(t *testing.T) {
	// Entries probing past a removed cell stay reachable: fill a small
	// index with colliding and wrapping hashes and remove in every order.
	hashes := []uint32{6, 7, 6, 7, 0, 6, 1}
	for skip := range hashes {
		ix := newIndex(4) // 8 cells
		for i, h := range hashes {
			ix.insert(h, i)
		}
		ix.remove(hashes[skip], skip)
		for i, h := range hashes {
			found := false
			mask := uint32(len(ix) - 1)
			for p := h & mask; ix[p].slot != 0; p = (p + 1) & mask {
				if ix[p].slot == uint32(i)+1 {
					found = true
					break
				}
			}
			if found != (i != skip) {
				t.Fatalf("remove %d: slot %d found = %v", skip, i, found)
			}
		}
	}
}
