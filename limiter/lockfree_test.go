package limiter

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lock-free path is exact while the table moves under it: 8
// goroutines on a few hot keys of one shard, while others add keys (the
// table doubles), delete them (removals shift the hot keys back), sweep,
// and reconfigure. Every hot key admits exactly its limit, and under
// -race no access goes unsynchronised. With a bound below the keys, the
// churn evicts too: a hot key evicted starts afresh, so it admits at
// least its limit.
func TestLockFreeUnderChurn(t *testing.T) {
	for _, tc := range []struct {
		algo    Algorithm
		maxKeys int
	}{
		{TokenBucket, 1024}, {LeakyBucket, 1024}, {SlidingWindow, 1024}, {FixedWindow, 1024},
		{TokenBucket, 256}, {LeakyBucket, 256}, {SlidingWindow, 256}, {FixedWindow, 256},
	} {
		algo := tc.algo
		const limit, hot = 20_000, 4
		cfg := Config{Algorithm: algo, Limits: []Limit{{limit, time.Hour}}, MaxKeys: tc.maxKeys} // one shard
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = limit-1, time.Hour
		}
		l := mustNew(t, cfg)
		if l.shards[0].table.cw == 0 || len(l.shards) != 1 {
			t.Fatalf("%s: not one atomic table", algo)
		}
		var allowed [hot]atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 2 * limit * hot / 8 { // twice the limit on each key
					k := (i + g) % hot
					if l.AllowAt("hot"+strconv.Itoa(k), base, 1).Allowed {
						allowed[k].Add(1)
					}
				}
			})
		}
		stop := make(chan struct{})
		var side sync.WaitGroup
		for g := range 2 {
			side.Go(func() {
				for round := 0; ; round++ {
					select {
					case <-stop:
						return
					default:
					}
					// up to 700 keys at a time: the table grows to 1024
					// slots, and a delete shifts whatever follows
					for i := range 350 {
						l.AllowAt("churn"+strconv.Itoa(g)+"-"+strconv.Itoa(i), base, 1)
					}
					for i := range 350 {
						l.Delete("churn" + strconv.Itoa(g) + "-" + strconv.Itoa(i))
					}
					l.SweepAt(base)
					if _, err := l.Reconfigure(cfg); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		side.Wait()
		for k := range hot {
			if got := allowed[k].Load(); got != limit && (l.Evictions() == 0 || got < limit) {
				t.Errorf("%s: hot key %d: %d allowed, want %d", algo, k, got, limit)
			}
		}
	}
}

// A decision the lock-free path takes is the one the locked path takes.
func TestLockFreeMatchesLocked(t *testing.T) {
	for _, algo := range []Algorithm{TokenBucket, LeakyBucket, SlidingWindow, FixedWindow} {
		cfg := Config{Algorithm: algo, Limits: []Limit{{10, time.Second}}}
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = 9, time.Second
		}
		fast, slow := mustNew(t, cfg), mustNew(t, cfg)
		for i := range slow.shards {
			slow.shards[i].table.cw = 0 // never published: always the lock
		}
		for i := range 200 {
			now := base.Add(time.Duration(i) * 37 * time.Millisecond)
			a, b := fast.AllowAt("k", now, int64(1+i%3)), slow.AllowAt("k", now, int64(1+i%3))
			if a != b {
				t.Fatalf("%s: request %d: lock-free %+v, locked %+v", algo, i, a, b)
			}
		}
	}
}

// AllowInto decides as AllowAt does, with quotas or without, on the
// lock-free path or logTake (one limit) and the locked one (two limits
// and a burst), into a Decision that held another decision before: the
// same Allowed, Delay and RetryAfter, and the same quotas where it sets
// them. Without quotas, only an allowed decision may leave them out.
func TestAllowIntoMatchesAllowAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, algo := range allAlgorithms {
		for _, two := range []bool{false, true} {
			cfg := Config{Algorithm: algo, Limits: []Limit{{10, time.Second}}}
			if algo == LeakyBucket {
				if two {
					continue // one limit, no burst bucket
				}
				cfg.Burst, cfg.MaxDelay = 9, time.Second
			}
			if two {
				cfg.Limits = append(cfg.Limits, Limit{25, 5 * time.Second})
				if algo != TokenBucket {
					cfg.Burst = 4
				}
			}
			ref, into := mustNew(t, cfg), mustNew(t, cfg)
			var d Decision
			for i := range d.Quotas {
				d.Quotas[i] = Quota{Limit: -1, Remaining: -1} // what a previous decision left
			}
			d.Allowed, d.Delay, d.RetryAfter, d.Len = true, 1, 1, MaxLimits
			elapsed := time.Duration(0)
			lean := 0
			for i := range 3000 {
				elapsed += time.Duration(rng.Int64N(int64(80 * time.Millisecond)))
				now := base.Add(elapsed)
				key := "k" + strconv.Itoa(rng.IntN(3))
				cost := int64(rng.IntN(4))
				quotas := rng.IntN(2) == 0
				want := ref.AllowAt(key, now, cost)
				into.AllowInto(&d, key, now, cost, 1, quotas)
				if d.Allowed != want.Allowed || d.Delay != want.Delay || d.RetryAfter != want.RetryAfter {
					t.Fatalf("%s (two limits %v): request %d (quotas %v): %+v, AllowAt %+v", algo, two, i, quotas, d, want)
				}
				switch {
				case d.Len == want.Len && slices.Equal(d.Quotas[:d.Len], want.Quotas[:want.Len]):
				case d.Len == 0 && !quotas && d.Allowed:
					lean++
				default:
					t.Fatalf("%s (two limits %v): request %d (quotas %v): quotas %d %+v, AllowAt %d %+v", algo, two, i, quotas, d.Len, d.Quotas, want.Len, want.Quotas)
				}
			}
			if fast := !two; fast != (lean > 0) { // lock-free, or logTake
				t.Errorf("%s (two limits %v): %d decisions without quotas", algo, two, lean)
			}
		}
	}
}

// A hot key's decision into a caller's Decision allocates nothing, with
// quotas or without.
func TestAllowIntoAllocs(t *testing.T) {
	for _, algo := range allAlgorithms {
		l := mustNew(t, benchConfig(algo, 0))
		var d Decision
		for _, quotas := range []bool{false, true} {
			if n := testing.AllocsPerRun(1000, func() { l.AllowInto(&d, "hot", base, 1, 1, quotas) }); n != 0 {
				t.Errorf("%s (quotas %v): %v allocations a decision", algo, quotas, n)
			}
		}
	}
}

// admit takes a request exactly when the algorithm's step takes it, leaves
// the key a unit and keeps the other word (where the unit buckets apply),
// with the same next state word and delay; the step run after, on the
// same state, reports what admit decided. On random states, times and
// costs, around the edges (a unit left, none, a previous count or none).
func TestAdmitMatchesStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 400000 {
		algo := []Algorithm{TokenBucket, LeakyBucket, SlidingWindow, FixedWindow}[i%4]
		n := int64(1 + rng.IntN(20))
		w := n * int64(time.Millisecond) * int64(1+rng.IntN(100))
		cfg := Config{Algorithm: algo, Limits: []Limit{{n, time.Duration(w)}}}
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = rng.Int64N(n), time.Duration(rng.Int64N(2*w))
		}
		p, err := newPlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lp := &p.limits[0]
		now := base.UnixNano() + rng.Int64N(100*w)
		cur := alignDown(now, w)
		cost := 1 + rng.Int64N(n+1)
		var other, x uint64
		switch algo {
		case TokenBucket, LeakyBucket:
			x = uint64(now + rng.Int64N(3*w) - w)
			if ub := lp.ub; ub.unit != 0 && rng.IntN(2) == 0 {
				// within a ns of the edges: the request fits, leaves a unit
				x = uint64(now + int64(ub.limit) - (cost+rng.Int64N(2))*int64(ub.unit) + rng.Int64N(3) - 1)
			}
			if rng.IntN(8) == 0 {
				other = 1 // a fraction: not the unit bucket's
			}
		case FixedWindow, SlidingWindow:
			other = uint64(cur)
			if rng.IntN(8) == 0 {
				other = uint64(cur - w) // a window past
			}
			x = uint64(rng.Int64N(n + 1))
			if algo == SlidingWindow && rng.IntN(2) == 0 {
				x |= uint64(rng.Int64N(n+1)) << 32
			}
		}
		var st, ran, ref step
		next, delay, didRun, ok := admit(&ran, p, lp, other, x, now, cur, cost)
		// the locked path's step on the same words
		words := []uint64{0, other, x} // windows: start, counts
		if algo == TokenBucket || algo == LeakyBucket {
			words = []uint64{0, x, other} // TAT, fraction
		}
		p.step(&ref, 0, words, nil, now, cost, 1)
		want, keeps := ref.b, ref.a == other // the CAS word it leaves; the other word kept
		if algo == TokenBucket || algo == LeakyBucket {
			want, keeps = ref.a, ref.b == other
		}
		takes := ref.ok && keeps && ref.quota.Remaining > 0
		if ok && (!takes || next != want || delay != ref.delay) {
			t.Fatalf("case %d: %s %d per %d, other %#x x %#x now %d cost %d: admit %v next %#x delay %d; step %+v",
				i, algo, n, w, other, x, now, cost, ok, next, delay, ref)
		}
		// admit decides wherever the lock-free path may: every window
		// request that takes, a bucket's where the unit bucket applies
		may := takes
		switch algo {
		case TokenBucket:
			may = may && other == 0 && lp.ub.unit != 0 && cost <= lp.capacity
		case LeakyBucket:
			may = may && other == 0 && lp.ub.unit != 0 && cost <= n
		}
		if may != ok {
			t.Fatalf("case %d: %s %d per %d, other %#x x %#x now %d cost %d: admit %v; step %+v",
				i, algo, n, w, other, x, now, cost, ok, ref)
		}
		if !ok {
			continue
		}
		fastStep(&st, p, lp, other, x, now, cur, cost)
		if st != ref {
			t.Fatalf("case %d: %s: the quota's step %+v, the locked path's %+v", i, algo, st, ref)
		}
		if didRun && ran != ref {
			t.Fatalf("case %d: %s: admit's step %+v, the step %+v", i, algo, ran, ref)
		}
	}
}
