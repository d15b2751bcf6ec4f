package gossip

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func randDemands(r *rand.Rand, n int) []NodeDemand {
	ds := make([]NodeDemand, n)
	for i := range ds {
		d := 0.0
		switch r.IntN(4) {
		case 0: // idle
		case 1:
			d = r.Float64() * 10
		default:
			d = r.ExpFloat64() * 300
		}
		ds[i] = NodeDemand{fmt.Sprintf("node-%02d", i), d}
	}
	return ds
}

func sumShares(s []NodeShare) float64 {
	t := 0.0
	for _, x := range s {
		t += x.Share
	}
	return t
}

func shareOfNode(s []NodeShare, node string) float64 {
	for _, x := range s {
		if x.Node == node {
			return x.Share
		}
	}
	return math.NaN()
}

func TestAllocateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		n := 1 + r.IntN(40)
		ds := randDemands(r, n)
		opts := AllocOptions{Capacity: []float64{0, 100, 1000, 1e5}[r.IntN(4)]}
		if r.IntN(3) == 0 {
			opts.Floor, opts.Headroom = r.Float64()*0.1, r.Float64()*0.5
		}
		got := Allocate(ds, opts)
		if len(got) != n {
			t.Fatalf("%d shares for %d nodes", len(got), n)
		}
		if s := sumShares(got); s > 1 || s < 1-1e-9 {
			t.Fatalf("iter %d: sum %v", iter, s)
		}
		floor := opts.Floor
		if floor == 0 {
			floor = DefaultFloor
		}
		for _, x := range got {
			if x.Share < floor/float64(n)*(1-1e-12) {
				t.Fatalf("iter %d: %s below the floor: %v", iter, x.Node, x.Share)
			}
		}
		// Order-independent.
		perm := append([]NodeDemand(nil), ds...)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		again := Allocate(perm, opts)
		for i := range got {
			if got[i] != again[i] {
				t.Fatalf("iter %d: permutation changed %v into %v", iter, got[i], again[i])
			}
		}
		// Monotone in a node's own demand.
		i := r.IntN(n)
		more := append([]NodeDemand(nil), ds...)
		more[i].Demand = ds[i].Demand*(1+r.Float64()) + r.Float64()*50
		before, after := shareOfNode(got, ds[i].Node), shareOfNode(Allocate(more, opts), ds[i].Node)
		if after < before*(1-1e-9) {
			t.Fatalf("iter %d: node %d asked %v then %v, share fell %v -> %v\n%v", iter, i, ds[i].Demand, more[i].Demand, before, after, ds)
		}
	}
}

func TestAllocateCases(t *testing.T) {
	for _, n := range []int{1, 2, 10, 100} {
		ds := make([]NodeDemand, n)
		for i := range ds {
			ds[i].Node = fmt.Sprint(i)
		}
		// Nothing asked: 1/N each.
		for _, x := range Allocate(ds, AllocOptions{Capacity: 100}) {
			if math.Abs(x.Share-1/float64(n)) > 1e-12 {
				t.Fatalf("n=%d idle: %v", n, x)
			}
		}
		// Equal demands: equal shares, whatever the load.
		for _, d := range []float64{1, 50, 1000} {
			for i := range ds {
				ds[i].Demand = d
			}
			got := Allocate(ds, AllocOptions{Capacity: 100})
			for _, x := range got {
				if math.Abs(x.Share-got[0].Share) > 1e-12 {
					t.Fatalf("n=%d equal %v: %v", n, d, got)
				}
			}
		}
		// One node asks it all.
		for i := range ds {
			ds[i].Demand = 0
		}
		ds[n/2].Demand = 100
		phi := DefaultFloor / float64(n)
		got := shareOfNode(Allocate(ds, AllocOptions{Capacity: 100}), ds[n/2].Node)
		if want := 1 - float64(n-1)*phi; got < want-1e-12 {
			t.Fatalf("n=%d single: %v < %v", n, got, want)
		}
	}
	if Allocate(nil, AllocOptions{}) != nil {
		t.Fatal("no nodes: want nil")
	}
	// Overloaded: exactly proportional above the floors.
	got := Allocate([]NodeDemand{{"a", 300}, {"b", 100}, {"c", 0}}, AllocOptions{Capacity: 100})
	phi := DefaultFloor / 3
	if math.Abs(got[0].Share-(phi+0.98*0.75)) > 1e-12 || math.Abs(got[1].Share-(phi+0.98*0.25)) > 1e-12 || got[2].Share != phi {
		t.Fatalf("overloaded: %v", got)
	}
	// Light nodes get demand plus headroom, the rest goes to the heavy.
	got = Allocate([]NodeDemand{{"a", 70}, {"b", 10}}, AllocOptions{Capacity: 100})
	if math.Abs(got[1].Share-0.17) > 1e-12 || math.Abs(got[0].Share-0.83) > 1e-12 {
		t.Fatalf("light and heavy: %v", got)
	}
	// Overloaded, a small node is cut in proportion too: every node admits
	// the same fraction of what it is asked.
	got = Allocate([]NodeDemand{{"a", 200}, {"b", 10}}, AllocOptions{Capacity: 100})
	if math.Abs(got[1].Share-(0.01+0.98*10/210)) > 1e-12 {
		t.Fatalf("overloaded light: %v", got)
	}
	// Underloaded: demand plus headroom, the rest split equally.
	got = Allocate([]NodeDemand{{"a", 20}, {"b", 10}}, AllocOptions{Capacity: 100})
	if extra := (0.98 - 0.33) / 2; math.Abs(got[0].Share-(0.01+0.22+extra)) > 1e-12 {
		t.Fatalf("underloaded: %v", got)
	}
	// Odd inputs.
	got = Allocate([]NodeDemand{{"a", math.NaN()}, {"b", math.Inf(1)}, {"c", -5}}, AllocOptions{})
	if s := sumShares(got); s > 1 || got[1].Share < 0.98 {
		t.Fatalf("odd inputs: %v", got)
	}
}

func rep(node string, seq uint64, demand uint32, keys ...uint64) Report {
	r := Report{Node: node, Seq: seq, IntervalMillis: 100}
	for _, k := range keys {
		r.Entries = append(r.Entries, Entry{Rule: 1, Key: k, Limit: 1000, Demand: demand})
	}
	return r
}

func TestShareTable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tab := NewShareTable(TableConfig{Self: "a", ClusterSize: 4})
	id := KeyID{1, 7}
	if s, hot := tab.Share(id, time.Second, t0); hot || math.Abs(s-0.275) > 1e-12 {
		t.Fatalf("cold: %v %v", s, hot)
	}
	// a is hot alone: the raise waits one interval.
	tab.Observe(rep("a", 1, 200, 7), ms(0))
	for _, n := range []string{"b", "c", "d"} {
		tab.Observe(rep(n, 1, 0), ms(1))
	}
	if s, hot := tab.Share(id, time.Second, ms(2)); !hot || math.Abs(s-0.275) > 1e-12 {
		t.Fatalf("before the raise: %v %v", s, hot)
	}
	want := 1 - 3*DefaultFloor/4
	if s, _ := tab.Share(id, time.Second, ms(102)); math.Abs(s-want) > 1e-12 {
		t.Fatalf("after the raise: %v, want %v", s, want)
	}
	// b reports as much: the cut applies at once.
	tab.Observe(rep("b", 2, 200, 7), ms(103))
	if s, _ := tab.Share(id, time.Second, ms(103)); math.Abs(s-(DefaultFloor/4+0.49)) > 1e-12 {
		t.Fatalf("cut: %v", s)
	}
	// An old report is ignored; another part of the last one (same Seq,
	// as SplitReport makes them) is taken.
	if tab.Observe(rep("b", 1, 0), ms(104)) {
		t.Fatal("old report taken")
	}
	if !tab.Observe(rep("b", 2, 0), ms(104)) {
		t.Fatal("a second part of a report ignored")
	}
	// b goes silent: its share comes back after TTL (800ms) and one interval.
	for i := 1; i <= 20; i++ {
		now := ms(103 + 100*i)
		tab.Observe(rep("a", uint64(1+i), 200, 7), now)
		tab.Observe(rep("c", uint64(1+i), 0), now)
		tab.Observe(rep("d", uint64(1+i), 0), now)
		s, _ := tab.Share(id, time.Second, now)
		if i <= 7 && s > 0.5 {
			t.Fatalf("at %d: %v before TTL", i, s)
		}
		if i >= 10 && math.Abs(s-(1-2*DefaultFloor/3)) > 1e-12 {
			t.Fatalf("at %d: %v after TTL", i, s)
		}
	}
	// a's demand stops: the key goes cold everywhere.
	tab.Observe(rep("a", 30, 0), ms(2200))
	if s, hot := tab.Share(id, time.Second, ms(2200)); hot || tab.Len() != 0 || math.Abs(s-0.275) > 1e-12 {
		t.Fatalf("cold again: %v %v %d", s, hot, tab.Len())
	}
}

func TestShareTablePartition(t *testing.T) {
	t0 := time.Unix(1000, 0)
	id := KeyID{1, 7}
	for _, tc := range []struct {
		policy PartitionPolicy
		want   float64
	}{
		{FailOpen, 1},
		// a and b keep 2/5 of their shares (0.2 each), capped to
		// 2×(2/5)×partitionSlack together: 0.04 each.
		{LocalShare, 2 * 2.0 / 5 * partitionSlack / 2},
		// c, d and e went silent: the minority denies.
		{FailClosed, 0},
	} {
		tab := NewShareTable(TableConfig{Self: "a", ClusterSize: 5, OnPartition: tc.policy, RaiseDelay: time.Nanosecond})
		for i, n := range []string{"a", "b", "c", "d", "e"} {
			tab.Observe(rep(n, 1, 500, 7), t0.Add(time.Duration(i)))
		}
		s, _ := tab.Share(id, time.Second, t0.Add(time.Millisecond))
		if math.Abs(s-(DefaultFloor/5+0.98/5)) > 1e-9 {
			t.Fatalf("%v: before: %v", tc.policy, s)
		}
		// Only b is heard from after: a sees 2 of 5.
		now := t0.Add(2 * time.Second)
		tab.Observe(rep("a", 2, 500, 7), now)
		tab.Observe(rep("b", 2, 500, 7), now)
		if !tab.Minority(now) {
			t.Fatal("not a minority")
		}
		tab.Share(id, time.Second, now)
		s, _ = tab.Share(id, time.Second, now.Add(time.Millisecond))
		if math.Abs(s-tc.want) > 1e-9 {
			t.Fatalf("%v: %v, want %v", tc.policy, s, tc.want)
		}
	}
}

// TestShareTableFailClosedHeal: a fail_closed minority that hears the
// others again takes no share for two raise delays (100 ms each), the
// time for them to hear it and cut; then its share at once.
func TestShareTableFailClosedHeal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	id := KeyID{1, 7}
	tab := NewShareTable(TableConfig{Self: "a", ClusterSize: 3, OnPartition: FailClosed})
	for i, n := range []string{"a", "b", "c"} {
		tab.Observe(rep(n, 1, 500, 7), ms(0))
		tab.Observe(rep(n, 2, 500, 7), ms(100+i))
	}
	even := DefaultFloor/3 + 0.98/3
	if s, _ := tab.Share(id, time.Second, ms(250)); math.Abs(s-even) > 1e-9 {
		t.Fatalf("before: %v, want %v", s, even)
	}
	// b and c silent for 2 s: a denies.
	tab.Observe(rep("a", 3, 500, 7), ms(2000))
	if s, _ := tab.Share(id, time.Second, ms(2000)); s != 0 {
		t.Fatalf("cut off: %v, want 0", s)
	}
	// healed: b and c heard at 2.05 s
	tab.Observe(rep("b", 3, 500, 7), ms(2050))
	tab.Observe(rep("c", 3, 500, 7), ms(2050))
	for _, at := range []int{2050, 2100, 2249} {
		if s, _ := tab.Share(id, time.Second, ms(at)); s != 0 {
			t.Fatalf("at %d ms, healed: %v, want 0 for 200 ms", at, s)
		}
	}
	if s, _ := tab.Share(id, time.Second, ms(2251)); math.Abs(s-even) > 1e-9 {
		t.Fatalf("at 2251 ms: %v, want %v", s, even)
	}
}

// A node that sees exactly half the cluster keeps its local share: the
// other half is no majority either, so it does not reclaim.
func TestShareTableHalfLocalShare(t *testing.T) {
	t0 := time.Unix(1000, 0)
	id := KeyID{1, 7}
	tab := NewShareTable(TableConfig{Self: "a", ClusterSize: 4, RaiseDelay: time.Nanosecond})
	for i, n := range []string{"a", "b", "c", "d"} {
		tab.Observe(rep(n, 1, 500, 7), t0.Add(time.Duration(i)))
	}
	now := t0.Add(2 * time.Second)
	tab.Observe(rep("a", 2, 500, 7), now)
	tab.Observe(rep("b", 2, 500, 7), now)
	if !tab.Minority(now) {
		t.Fatal("not a minority")
	}
	tab.Share(id, time.Second, now)
	s, _ := tab.Share(id, time.Second, now.Add(time.Millisecond))
	if want := DefaultFloor/4 + 0.98/4; math.Abs(s-want) > 1e-9 {
		t.Fatalf("%v, want %v", s, want)
	}
}

func TestShareTableBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tab := NewShareTable(TableConfig{Self: "a", ClusterSize: 2, MaxKeys: 10})
	for i := range 100 {
		tab.Observe(rep("a", uint64(i+1), 500, uint64(i)), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if tab.Len() != 10 {
		t.Fatalf("%d keys", tab.Len())
	}
	if keys := tab.Keys(); keys[0].Key != 99 || keys[9].Key != 90 {
		t.Fatalf("LRU order: %v", keys)
	}
}

// A window's use stays with the node that made it: a node whose share
// rises keeps room for what the others used of the window in force (plus
// a slack of 5% of the limit), until their use slides out of it. The cap
// is not a raise: it lifts as soon as their use falls.
func TestShareTableWindowUse(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tab := NewShareTable(TableConfig{Self: "b", ClusterSize: 2})
	id := KeyID{1, 7}
	used := func(node string, seq uint64, demand, used uint32) Report {
		r := rep(node, seq, demand, 7)
		r.Entries[0].Admitted = used
		return r
	}
	// the traffic moved from a (which used 800 of the 1,000 in force) to b
	tab.Observe(used("a", 1, 0, 800), ms(0))
	tab.Observe(used("b", 1, 200, 0), ms(0))
	tab.Share(id, time.Second, ms(0))
	if s, _ := tab.Share(id, time.Second, ms(100)); math.Abs(s-0.25) > 1e-9 {
		t.Fatalf("a used 800 of 1,000: b's share %v, want 0.25 (1 − 0.8 + 0.05)", s)
	}
	// a's use slides out of the window: b's share rises to its allocation
	tab.Observe(used("a", 2, 0, 0), ms(150))
	tab.Observe(used("b", 2, 200, 300), ms(150)) // b's own use does not cap it
	tab.Share(id, time.Second, ms(150))
	if s, _ := tab.Share(id, time.Second, ms(250)); math.Abs(s-(1-DefaultFloor/2)) > 1e-9 {
		t.Fatalf("a's use gone: b's share %v, want %v", s, 1-DefaultFloor/2)
	}
}

// A hot key that no node asks for any more is divided by the nodes' use
// of its window, not sent back to the cold share (issue 36: a key of 30 a
// day, all on one node of three, admitted 11): the node that used it
// keeps 1 − (N−1)×floor of the limit while it stays idle, the others a
// floor, and the key is cold again once no node reports a use.
func TestShareTableIdleKeyByUse(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	day := 24 * time.Hour
	id := KeyID{1, 7}
	used := func(node string, seq uint64, demand, used uint32) Report {
		r := rep(node, seq, demand, 7)
		r.Entries[0].Limit, r.Entries[0].Admitted = 30, used
		return r
	}
	a := NewShareTable(TableConfig{Self: "a", ClusterSize: 3})
	b := NewShareTable(TableConfig{Self: "b", ClusterSize: 3})
	for _, tab := range []*ShareTable{a, b} {
		for _, node := range []string{"b", "c"} {
			tab.Observe(Report{Node: node, Seq: 1}, t0) // known, live, not asking
		}
	}
	one := 1 - 2*DefaultFloor/3
	for i, step := range []struct {
		demand, used uint32
		wantA, wantB float64
		hot          bool
	}{
		{0, 6, a.ColdShare(), DefaultFloor / 3, true}, // newly hot: a at most the cold share for a raise delay
		{0, 6, one, DefaultFloor / 3, true},
		{3, 20, one, DefaultFloor / 3, true}, // asked again: by rate, the same split
		{0, 20, one, DefaultFloor / 3, true}, // idle again: by use
		{0, 0, a.ColdShare(), b.ColdShare(), false},
	} {
		now := ms(100 * (i + 1))
		r := used("a", uint64(i+1), step.demand, step.used)
		a.Observe(r, now)
		b.Observe(r, now)
		sa, hot := a.Share(id, day, now)
		sb, _ := b.Share(id, day, now)
		if math.Abs(sa-step.wantA) > 1e-9 || math.Abs(sb-step.wantB) > 1e-9 || hot != step.hot {
			t.Fatalf("step %d: a's share %v (hot %v), b's %v; want %v (hot %v), %v", i, sa, hot, sb, step.wantA, step.hot, step.wantB)
		}
	}
}
