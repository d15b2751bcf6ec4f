package gossip

import (
	"testing"
	"time"
)

func TestApportion(t *testing.T) {
	for _, c := range []struct {
		shares []float64
		n      int64
		rot    uint64
		want   []int64
	}{
		{[]float64{0.7, 0.15, 0.15}, 2, 0, []int64{2, 0, 0}},        // remainders 0.4, 0.3, 0.3
		{[]float64{1. / 3, 1. / 3, 1. / 3}, 2, 0, []int64{1, 1, 0}}, // ties in order...
		{[]float64{1. / 3, 1. / 3, 1. / 3}, 2, 1, []int64{0, 1, 1}}, // ...rotated by the key
		{[]float64{0.8, 0.1, 0.1}, 30, 0, []int64{24, 3, 3}},
		{[]float64{0.5, 0.2}, 10, 0, []int64{5, 2}}, // shares summing to 0.7: 7 given
	} {
		sh := make([]NodeShare, len(c.shares))
		for i, s := range c.shares {
			sh[i] = NodeShare{string(rune('a' + i)), s}
		}
		got := make([]int64, len(sh))
		apportion(sh, c.n, c.rot, got)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("apportion(%v, %d, %d) = %v, want %v", c.shares, c.n, c.rot, got, c.want)
				break
			}
		}
	}
}

// Two nodes (a third later), N=10: the cold cap is floor(N/2); a report of demand makes
// the key hot and splits N in whole requests; a node holding more than
// its cap keeps the other's cap down until it drains.
func TestSharingSlots(t *testing.T) {
	rule := KeyHash("c")
	inFlight := map[string]int64{}
	a := NewSharing(SharingConfig{Self: "a"})
	a.SetClusterSize(2)
	a.SetRules([]Rule{{Name: "c", Concurrent: func(key string) (int64, int64) { return inFlight[key], inFlight[key] }}})
	now := time.Unix(1_700_000_000, 0)
	if c, tracked := a.Slots(rule, "k", 10); c != 5 || tracked {
		t.Fatalf("cold cap %d %v, want 5", c, tracked)
	}
	if c, _ := a.Slots(rule, "k", 1); c != 0 {
		t.Fatalf("cold cap of N=1 over 2 nodes: %d, want 0", c)
	}
	a.Refused(rule, "k", 10) // tracked from now
	inFlight["k"] = 5
	// b asks for 8 and holds 8 (its cap was larger under an older view).
	b := func(seq uint64, demand, held uint32) Report {
		return Report{Node: "b", Seq: seq, IntervalMillis: 100, Entries: []Entry{{Rule: rule, Key: KeyHash("k"), Limit: 10, Demand: demand, Admitted: held}}}
	}
	a.Observe(b(1, 8, 8), now)
	a.Tick(now)
	c, tracked := a.Slots(rule, "k", 10)
	// b's report came first: a's cap fell to 1 then; its raise to 4
	// (floor 4.3) waits for the raise delay, and the room is 10 − 8 = 2.
	if !tracked || c != 1 {
		t.Fatalf("cap with b holding 8: %d %v, want 1", c, tracked)
	}
	a.Tick(now.Add(50 * time.Millisecond))
	if c, _ := a.Slots(rule, "k", 10); c != 1 {
		t.Fatalf("cap before the raise delay: %d, want 1", c)
	}
	// b drains to 2 and asks for 2: a's share rises after the raise delay
	// and an interval (b may apply its cut an interval after the report
	// reaches it), counted from the tick that first computes the raise.
	a.Observe(b(2, 2, 2), now.Add(100*time.Millisecond))
	a.Tick(now.Add(100 * time.Millisecond))
	a.Tick(now.Add(200 * time.Millisecond))
	if c, _ := a.Slots(rule, "k", 10); c >= 6 {
		t.Fatalf("cap an interval after b drained: %d, want below 6 (the raise waits)", c)
	}
	a.Tick(now.Add(300 * time.Millisecond))
	a.Tick(now.Add(400 * time.Millisecond))
	if c, _ := a.Slots(rule, "k", 10); c < 6 || c > 8 {
		t.Fatalf("cap after b drained: %d, want 6..8", c)
	}
	// b goes silent; c joined and has not reported the key: it may not
	// follow it yet, and admit at its cold cap, floor(10/3) = 3, so a
	// leaves it that room. a and c are a majority of 3, and after the TTL
	// b's share is reclaimed: a asks 6, so it gets 6×1.1 of N, its floor
	// and a third of the rest: 7.7, 8 with the remainder; 10 − 3 = 7 of it.
	a.SetClusterSize(3)
	i := 3
	for ; i < 15; i++ {
		at := now.Add(time.Duration(i) * 100 * time.Millisecond)
		a.Observe(Report{Node: "c", Seq: uint64(i), IntervalMillis: 100}, at)
		a.Tick(at)
	}
	if c, _ := a.Slots(rule, "k", 10); c != 7 {
		t.Fatalf("cap with b silent, c not following the key: %d, want 7", c)
	}
	// c follows the key now, idle: it reports it with no demand, and a
	// has its 8.
	for end := i + 3; i < end; i++ {
		at := now.Add(time.Duration(i) * 100 * time.Millisecond)
		a.Observe(Report{Node: "c", Seq: uint64(i), IntervalMillis: 100, Entries: []Entry{{Rule: rule, Key: KeyHash("k"), Limit: 10}}}, at)
		a.Tick(at)
	}
	if c, _ := a.Slots(rule, "k", 10); c != 8 {
		t.Fatalf("cap with b silent, c idle and following the key: %d, want 8", c)
	}
}

// Slots on the request path: a tracked key, and one that is not.
func BenchmarkSharingSlots(b *testing.B) {
	rule := KeyHash("c")
	s := NewSharing(SharingConfig{Self: "a"})
	s.SetRules([]Rule{{Name: "c", Concurrent: func(string) (int64, int64) { return 0, 0 }}})
	s.Track(rule, "hot", 30)
	b.Run("tracked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Slots(rule, "hot", 30)
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Slots(rule, "cold", 30)
		}
	})
}
