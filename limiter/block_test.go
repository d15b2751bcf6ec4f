package limiter

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

func mustBlocks(t testing.TB, ds []time.Duration, reset time.Duration, maxKeys int) *Blocks {
	t.Helper()
	b, err := NewBlocks(ds, reset, maxKeys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Escalation: block_for 1m 10m 1h, block_reset 24h, step by step.
func TestBlocksEscalation(t *testing.T) {
	b := mustBlocks(t, []time.Duration{time.Minute, 10 * time.Minute, time.Hour}, 0, 0)
	m := time.Minute
	for i, s := range []struct {
		at       time.Duration
		until    time.Duration
		offences int
		isNew    bool
	}{
		{0, m, 1, true},
		{30 * time.Second, m, 1, false}, // idempotent while blocked
		{m - ns, m, 1, false},
		{m, 11 * m, 2, true},                                            // the block ended at 1m: the second lasts 10m
		{11*m + 24*time.Hour, 71*m + 24*time.Hour, 3, true},             // exactly reset after: remembered
		{71*m + 24*time.Hour, 131*m + 24*time.Hour, 4, true},            // the last duration repeats
		{131*m + 48*time.Hour + ns, 132*m + 48*time.Hour + ns, 1, true}, // forgotten a nanosecond past reset
	} {
		u, n, isNew := b.OffendAt("k", base.Add(s.at))
		if !u.Equal(base.Add(s.until)) || n != s.offences || isNew != s.isNew {
			t.Errorf("step %d: OffendAt at %v = %v, %d, %v; want %v, %d, %v", i, s.at, u.Sub(base), n, isNew, s.until, s.offences, s.isNew)
		}
	}
	last := 132*m + 48*time.Hour + ns
	if u, ok := b.BlockedAt("k", base.Add(last-ns)); !ok || !u.Equal(base.Add(last)) {
		t.Errorf("BlockedAt a nanosecond before the end: %v %v", u, ok)
	}
	if _, ok := b.BlockedAt("k", base.Add(last)); ok {
		t.Error("BlockedAt at the end: still blocked")
	}
	if _, ok := b.BlockedAt("other", base.Add(last-ns)); ok {
		t.Error("another key blocked")
	}
	if b.Started() != 5 {
		t.Errorf("Started = %d, want 5", b.Started())
	}
}

func TestBlocksInfoListLiftSweep(t *testing.T) {
	b := mustBlocks(t, []time.Duration{time.Minute}, time.Hour, 0)
	for i := range 5 {
		b.OffendAt("k"+strconv.Itoa(i), base.Add(time.Duration(i)*time.Second))
	}
	now := base.Add(2 * time.Second)
	if got := b.BlockedCountAt(now); got != 5 {
		t.Errorf("BlockedCountAt = %d, want 5", got)
	}
	l := b.ListAt(now, 3)
	if len(l) != 3 || l[0].Key != "k4" || l[2].Key != "k2" || !l[0].Until.Equal(base.Add(time.Minute+4*time.Second)) || l[0].Offences != 1 {
		t.Errorf("ListAt: %+v", l)
	}
	if !b.Lift("k4") || b.Lift("k4") {
		t.Error("Lift twice: want true then false")
	}
	if _, ok := b.InfoAt("k4", now); ok {
		t.Error("InfoAt after Lift")
	}
	if bk, ok := b.InfoAt("k0", base.Add(time.Minute+time.Hour)); !ok || bk.Offences != 1 || !bk.Until.Equal(base.Add(time.Minute)) {
		t.Errorf("InfoAt within reset: %+v %v", bk, ok)
	}
	if got := b.BlockedCountAt(base.Add(time.Minute + time.Second)); got != 2 { // k2, k3
		t.Errorf("BlockedCountAt later = %d, want 2", got)
	}
	// k0 ended at 1m: forgotten after 1m+1h; k1 at 1m1s
	if n := b.SweepAt(base.Add(time.Minute + time.Hour)); n != 0 {
		t.Errorf("SweepAt at exactly reset freed %d", n)
	}
	if n := b.SweepAt(base.Add(time.Minute + time.Hour + ns)); n != 1 || b.Len() != 3 {
		t.Errorf("SweepAt freed %d, Len %d; want 1, 3", n, b.Len())
	}
	if got := b.ListAt(base.Add(time.Hour), 0); len(got) != 0 {
		t.Errorf("ListAt after the blocks: %+v", got)
	}
}

// MergeAt keeps the later end and the higher count, in any order and any
// number of times.
func TestBlocksMergeCommutes(t *testing.T) {
	type m struct {
		until    time.Duration
		offences int
	}
	merges := []m{{time.Minute, 1}, {10 * time.Minute, 2}, {5 * time.Minute, 3}, {-2 * time.Hour, 9}, {time.Minute, 1}}
	rng := rand.New(rand.NewPCG(7, 7))
	var want string
	for round := range 50 {
		b := mustBlocks(t, []time.Duration{time.Minute}, time.Hour, 0)
		for _, i := range rng.Perm(len(merges)) {
			b.MergeAt("k", base.Add(merges[i].until), merges[i].offences, base)
		}
		bk, _ := b.InfoAt("k", base)
		got := fmt.Sprint(bk.Until.Sub(base), bk.Offences)
		if round == 0 {
			want = got
		} else if got != want {
			t.Fatalf("round %d: %s, want %s", round, got, want)
		}
		if b.MergeAt("k", base.Add(10*time.Minute), 3, base) {
			t.Error("merging a block held again changed the state")
		}
	}
	// {-2h, 9}: ended more than the reset before now, ignored
	if want != "10m0s 3" {
		t.Errorf("merged %s, want 10m0s 3", want)
	}
	// a learnt block escalates a local offence
	b := mustBlocks(t, []time.Duration{time.Minute, 10 * time.Minute}, time.Hour, 0)
	b.MergeAt("k", base.Add(time.Minute), 1, base)
	if _, ok := b.BlockedAt("k", base.Add(30*time.Second)); !ok {
		t.Error("a merged block is not in force")
	}
	if u, n, _ := b.OffendAt("k", base.Add(2*time.Minute)); n != 2 || !u.Equal(base.Add(12*time.Minute)) {
		t.Errorf("offence after a merged block: %v, %d", u.Sub(base), n)
	}
}

// Bounded: past maxKeys, the entry whose block ended longest ago goes; a
// running block is never dropped for a new one, which is refused.
func TestBlocksBound(t *testing.T) {
	b := mustBlocks(t, []time.Duration{time.Minute}, time.Hour, 3)
	b.OffendAt("a", base)
	b.OffendAt("b", base.Add(time.Second))
	b.OffendAt("c", base.Add(2*time.Second))
	if u, n, isNew := b.OffendAt("d", base.Add(3*time.Second)); !u.IsZero() || n != 0 || isNew || b.Refused() != 1 {
		t.Errorf("a fourth block while three run: %v %d %v, refused %d", u, n, isNew, b.Refused())
	}
	if b.MergeAt("d", base.Add(time.Hour), 1, base.Add(3*time.Second)) {
		t.Error("a merged fourth block while three run was taken")
	}
	// a and b have ended; a ended first, so it goes
	if _, _, isNew := b.OffendAt("d", base.Add(time.Minute+time.Second)); !isNew {
		t.Error("a new block refused while ended ones are held")
	}
	if _, ok := b.InfoAt("a", base.Add(time.Minute+time.Second)); ok {
		t.Error("a (ended longest ago) was kept")
	}
	if _, ok := b.InfoAt("b", base.Add(time.Minute+time.Second)); !ok {
		t.Error("b was dropped")
	}
	if b.Len() != 3 {
		t.Errorf("Len = %d, want 3", b.Len())
	}
}

func TestBlocksRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		ds    []time.Duration
		reset time.Duration
		max   int
	}{{nil, 0, 0}, {[]time.Duration{0}, 0, 0}, {[]time.Duration{-1}, 0, 0}, {[]time.Duration{time.Minute}, -1, 0}, {[]time.Duration{time.Minute}, 0, -1}} {
		if _, err := NewBlocks(c.ds, c.reset, c.max); err == nil {
			t.Errorf("NewBlocks(%v, %v, %d): no error", c.ds, c.reset, c.max)
		}
	}
}

// Concurrent offences, merges, lifts, lookups and sweeps on shared keys
// (run with -race); the heap stays a heap.
func TestBlocksConcurrent(t *testing.T) {
	b := mustBlocks(t, []time.Duration{time.Second, time.Minute}, time.Minute, 5000)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 20000 {
				k := "k" + strconv.Itoa(rng.IntN(3000))
				now := base.Add(time.Duration(i) * time.Millisecond)
				switch rng.IntN(6) {
				case 0:
					b.OffendAt(k, now)
				case 1:
					b.MergeAt(k, now.Add(time.Second), 2, now)
				case 2:
					b.Lift(k)
				case 3:
					b.SweepAt(now)
				default:
					b.BlockedAt(k, now)
				}
			}
		})
	}
	wg.Wait()
	for i := range b.shards {
		s := &b.shards[i]
		for j, e := range s.heap {
			if e.idx != j || s.keys[e.key] != e || j > 0 && s.heap[(j-1)/2].until > e.until {
				t.Fatalf("shard %d: heap broken at %d", i, j)
			}
		}
		if len(s.heap) != len(s.keys) || len(s.heap) > s.capacity {
			t.Fatalf("shard %d: %d in heap, %d keys, capacity %d", i, len(s.heap), len(s.keys), s.capacity)
		}
	}
}

func TestBlockedAtAllocs(t *testing.T) {
	b := mustBlocks(t, []time.Duration{time.Hour}, 0, 0)
	if a := testing.AllocsPerRun(100, func() { b.BlockedAt("k", base) }); a != 0 {
		t.Errorf("BlockedAt, none blocked: %v allocs", a)
	}
	b.OffendAt("k", base)
	if a := testing.AllocsPerRun(100, func() { b.BlockedAt("k", base); b.BlockedAt("j", base) }); a != 0 {
		t.Errorf("BlockedAt, one blocked: %v allocs", a)
	}
}

// BenchmarkBlockedAt: a rule with no block running, and one with 10,000
// (a lookup of a blocked key and of a key not blocked), in parallel.
func BenchmarkBlockedAt(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
	}
	none := mustBlocks(b, []time.Duration{time.Hour}, 0, 0)
	many := mustBlocks(b, []time.Duration{time.Hour}, 0, 100_000)
	for i := range 10_000 {
		many.OffendAt("blocked"+strconv.Itoa(i), base)
	}
	many.OffendAt(keys[0], base)
	for _, bc := range []struct {
		name string
		b    *Blocks
		key  func(i int) string
	}{
		{"none", none, func(i int) string { return keys[i&1023] }},
		{"blocked", many, func(int) string { return keys[0] }},
		{"not-blocked", many, func(i int) string { return keys[1+i%1023] }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					bc.b.BlockedAt(bc.key(i), base)
					i++
				}
			})
		})
	}
}

// BenchmarkChargeAt: a charge on a hot key, per algorithm.
func BenchmarkChargeAt(b *testing.B) {
	for _, algo := range allAlgorithms {
		b.Run(string(algo), func(b *testing.B) {
			l := mustNew(b, Config{Algorithm: algo, Limits: []Limit{{1_000_000, time.Hour}}})
			b.ReportAllocs()
			for i := range b.N {
				l.Charge("k", base.Add(time.Duration(i)), 1, 1)
			}
		})
	}
}

// BenchmarkBlockedAtNone is the cost a rule with blocks but none running
// adds to a request: one atomic load.
func BenchmarkBlockedAtNone(b *testing.B) {
	bl := mustBlocks(b, []time.Duration{time.Hour}, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		bl.BlockedAt("10.0.0.1", base)
	}
}

// A block's start is its end less the duration of that offence's block,
// the last duration repeating.
func TestBlocksStartOf(t *testing.T) {
	b, err := NewBlocks([]time.Duration{time.Minute, 10 * time.Minute}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Unix(1_000_000, 0)
	for offences, want := range []time.Duration{time.Minute, time.Minute, 10 * time.Minute, 10 * time.Minute} {
		if got := until.Sub(b.StartOf(until, offences)); got != want {
			t.Errorf("offence %d: began %v before its end, want %v", offences, got, want)
		}
	}
}
