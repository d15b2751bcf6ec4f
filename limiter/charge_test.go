package limiter

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// firstAllowedAt checks that a one-unit request of key is denied at
// base+at−1ns and allowed at base+at, by PeekScaledAt and then AllowScaledAt.
func firstAllowedAt(t *testing.T, name string, l *Limiter, key string, at time.Duration, scale float64) Decision {
	t.Helper()
	if d := l.PeekScaledAt(key, base.Add(at-ns), 1, scale); d.Allowed {
		t.Errorf("%s: peek at %v−1ns allowed, want denied", name, at)
	}
	if d := l.AllowScaledAt(key, base.Add(at-ns), 1, scale); d.Allowed {
		t.Errorf("%s: allow at %v−1ns allowed, want denied", name, at)
	} else if d.RetryAfter != ns {
		t.Errorf("%s: RetryAfter at %v−1ns = %v, want 1ns", name, at, d.RetryAfter)
	}
	if d := l.PeekScaledAt(key, base.Add(at), 1, scale); !d.Allowed {
		t.Errorf("%s: peek at %v denied, want allowed", name, at)
	}
	d := l.AllowScaledAt(key, base.Add(at), 1, scale)
	if !d.Allowed {
		t.Errorf("%s: allow at %v denied, want allowed", name, at)
	}
	return d
}

// After a charge past the limit, the next request is allowed at exactly
// the time each algorithm's debt is paid (10 per 10s: a unit is 1s).
func TestChargeStepTables(t *testing.T) {
	ten := []Limit{{10, 10 * s1}}
	for _, tc := range []struct {
		name  string
		cfg   Config
		setup func(l *Limiter) // before the check; "k" is charged here
		next  time.Duration    // the first time one unit fits again
		delay time.Duration    // leaky bucket: the delay then
		scale float64
	}{
		// 10 taken, 5 charged past: the window's end forgives the rest
		{name: "fixed_window", cfg: Config{Algorithm: FixedWindow, Limits: ten}, setup: func(l *Limiter) {
			l.AllowAt("k", base.Add(2*s1), 10)
			l.Charge("k", base.Add(3*s1), 5, 1)
		}, next: 10 * s1},
		// 15 charged in the first window: in the next one, 15×(1−e/10s)+1 ≤ 10 at e = 4s
		{name: "sliding_window", cfg: Config{Algorithm: SlidingWindow, Limits: ten}, setup: func(l *Limiter) {
			l.Charge("k", base.Add(2*s1), 15, 1)
		}, next: 14 * s1},
		// shared (its windows the key's own, prev's part rounded down): 15
		// charged at 2s, in the key's next window [12s, 22s)
		// ⌊15×(1−e/10s)⌋+1 ≤ 10 once e > 3.33…s
		{name: "sliding_window shared", cfg: Config{Algorithm: SlidingWindow, Limits: ten, Shares: true}, setup: func(l *Limiter) {
			l.Charge("k", base.Add(2*s1), 15, 1)
		}, next: 12*s1 + 3333333334*ns},
		// 10 taken at 0, 5 charged at 1s: the first event leaves at 10s, leaving 5
		{name: "sliding_log", cfg: Config{Algorithm: SlidingLog, Limits: ten}, setup: func(l *Limiter) {
			l.AllowAt("k", base, 10)
			l.Charge("k", base.Add(s1), 5, 1)
		}, next: 10 * s1},
		// 15 units of work in a bucket of 10: one unit fits once 9s are left, at 6s
		{name: "token_bucket", cfg: Config{Algorithm: TokenBucket, Limits: ten}, setup: func(l *Limiter) {
			l.Charge("k", base, 15, 1)
		}, next: 6 * s1},
		// a queue 15s long, at most 5s (depth 5) admitted: at 10s, held 5s
		{name: "leaky_bucket", cfg: Config{Algorithm: LeakyBucket, Limits: ten, Burst: 5, MaxDelay: 10 * s1}, setup: func(l *Limiter) {
			l.Charge("k", base, 15, 1)
		}, next: 10 * s1, delay: 5 * s1},
		// at scale 0.5, 5 per 10s (a unit 2s): 8 charged, 16s of work in a
		// bucket of 10s, one unit fits at 8s; the debt is not read as a
		// full bucket (which would allow at 2s)
		{name: "token_bucket scaled", cfg: Config{Algorithm: TokenBucket, Limits: ten}, scale: 0.5, setup: func(l *Limiter) {
			l.Charge("k", base, 8, 0.5)
			l.AllowScaledAt("k", base.Add(s1), 1, 0.5) // a scaled decision: denied, the debt kept
		}, next: 8 * s1},
		// two limits: 25 charged, 10/10s frees a unit at 16s, 20/60s (a unit 3s) at 18s
		{name: "token_bucket two limits", cfg: Config{Algorithm: TokenBucket, Limits: []Limit{{10, 10 * s1}, {20, 60 * s1}}}, setup: func(l *Limiter) {
			l.Charge("k", base, 25, 1)
		}, next: 18 * s1},
		{name: "sliding_window two limits", cfg: Config{Algorithm: SlidingWindow, Limits: []Limit{{10, 10 * s1}, {100, 100 * s1}}}, setup: func(l *Limiter) {
			l.Charge("k", base.Add(2*s1), 15, 1)
		}, next: 14 * s1},
		// burst 5 in front of 100/60s (a unit 0.6s): 8 charged, 4.8s of work
		// in a bucket of 3s: one unit fits at 2.4s
		{name: "fixed_window burst", cfg: Config{Algorithm: FixedWindow, Limits: []Limit{{100, 60 * s1}}, Burst: 5}, setup: func(l *Limiter) {
			l.Charge("k", base, 8, 1)
		}, next: 2400 * ms},
		{name: "sliding_log burst", cfg: Config{Algorithm: SlidingLog, Limits: []Limit{{100, 60 * s1}}, Burst: 5}, setup: func(l *Limiter) {
			l.Charge("k", base, 8, 1)
		}, next: 2400 * ms},
	} {
		scale := tc.scale
		if scale == 0 {
			scale = 1
		}
		l := mustNew(t, tc.cfg)
		tc.setup(l)
		d := firstAllowedAt(t, tc.name, l, "k", tc.next, scale)
		if d.Delay != tc.delay {
			t.Errorf("%s: delay = %v, want %v", tc.name, d.Delay, tc.delay)
		}
	}
}

// A charge is seen by the lock-free path: a known, referenced key of a
// one-limit rule, charged to its limit, is denied at once.
func TestChargeLockFree(t *testing.T) {
	for _, algo := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, LeakyBucket} {
		cfg := Config{Algorithm: algo, Limits: []Limit{{10, 10 * s1}}}
		l := mustNew(t, cfg)
		if l.shards[0].table.cw == 0 {
			t.Fatalf("%s: not lock-free", algo)
		}
		l.AllowAt("k", base, 1)
		if !l.AllowAt("k", base, 1).Allowed { // the second: referenced, lock-free from now on
			t.Fatalf("%s: second request denied", algo)
		}
		l.Charge("k", base, 8, 1) // at the limit (the leaky bucket: a queue of 10s, past MaxDelay)
		if l.AllowAt("k", base, 1).Allowed {
			t.Errorf("%s: allowed after a charge to the limit", algo)
		}
	}
}

// Charges racing with lock-free decisions lose nothing: every unit taken
// either way counts.
func TestChargeConcurrent(t *testing.T) {
	for _, algo := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, SlidingLog} {
		const n = 1_000_000
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{n, 1000 * s1}}, MaxKeys: 1024})
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5000 {
					if l.AllowAt("k", base, 1).Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				for range 1000 {
					l.Charge("k", base, 3, 1)
				}
			})
		}
		wg.Wait()
		want := n - allowed.Load() - 6000
		if got := l.PeekAt("k", base, 1).Quotas[0].Remaining + 1; got != want {
			t.Errorf("%s: remaining %d, want %d (allowed %d)", algo, got, want, allowed.Load())
		}
	}
}

// A sliding log holds at most its limit's count of events however many
// charges come: past it, a charge joins the newest event, moved to now.
func TestChargeLogBounded(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{3, 10 * s1}}})
	for i := range 10 {
		l.Charge("k", base.Add(time.Duration(i+1)*ms), 1, 1)
	}
	h := hashKey(&l.seed, "k")
	s := l.shard(h)
	slot, _ := s.table.find(h)
	if lg := s.table.logsAt(slot)[0]; lg.n != 3 || lg.total != 10 {
		t.Fatalf("log: %d events, %d units; want 3, 10", lg.n, lg.total)
	}
	// events at 1ms (1), 2ms (1), 10ms (8): one unit fits when the last leaves
	firstAllowedAt(t, "sliding_log bounded", l, "k", 10*s1+10*ms, 1)
}

// PeekScaledAt with a cost of 1 answers "one unit left" as AllowScaledAt
// would decide it, for every algorithm, with charges, burst and two limits.
func TestPeekOneUnitMatchesAllow(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, cfg := range []Config{
			{Algorithm: algo, Limits: []Limit{{7, 3 * s1}}},
			{Algorithm: algo, Limits: []Limit{{7, 3 * s1}, {20, 30 * s1}}, Burst: 3},
		} {
			if algo == LeakyBucket {
				cfg.Limits, cfg.Burst, cfg.MaxDelay = cfg.Limits[:1], 2, 2*s1
			}
			l := mustNew(t, cfg)
			rng := rand.New(rand.NewPCG(1, uint64(len(cfg.Limits))))
			now := base
			for i := range 3000 {
				now = now.Add(time.Duration(rng.IntN(int(400 * ms))))
				scale := []float64{1, 1, 0.5, 2}[rng.IntN(4)]
				key := []string{"a", "b"}[rng.IntN(2)]
				if rng.IntN(3) == 0 {
					l.Charge(key, now, int64(rng.IntN(6)), scale)
					continue
				}
				p := l.PeekScaledAt(key, now, 1, scale)
				d := l.AllowScaledAt(key, now, 1, scale)
				if p.Allowed != d.Allowed || p.RetryAfter != d.RetryAfter {
					t.Fatalf("%s %d limits, step %d: peek %v/%v, allow %v/%v", algo, len(cfg.Limits), i, p.Allowed, p.RetryAfter, d.Allowed, d.RetryAfter)
				}
			}
		}
	}
}

// A charge creates a key, leaves it unspent on its first request, and a
// known key spent once it is at a limit; MarkSpent marks an existing key.
func TestChargeSpentAndMarkSpent(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, 10 * s1}}})
	l.Charge("k", base, 20, 1)
	if !l.Contains("k") || spentKeys(l) != 0 {
		t.Fatalf("first charge: contains %v, spent %d", l.Contains("k"), spentKeys(l))
	}
	l.Charge("k", base, 1, 1)
	if spentKeys(l) != 1 {
		t.Fatalf("second charge past the limit: spent %d, want 1", spentKeys(l))
	}
	if l.MarkSpent("absent") || l.Contains("absent") {
		t.Fatal("MarkSpent created a key")
	}
	l.AllowAt("j", base, 1)
	if !l.MarkSpent("j") || spentKeys(l) != 2 {
		t.Fatalf("MarkSpent: spent %d, want 2", spentKeys(l))
	}
	l.Charge("k", base, 0, 1) // takes nothing
	l.Charge("k", base, 5, 0)
}

// spentKeys is the number of keys marked spent.
func spentKeys(l *Limiter) int {
	n := 0
	for i := range l.shards {
		n += l.shards[i].table.spent
	}
	return n
}

// TestChargeLargest: a charge of the largest count (a cost_header value
// past 2^63−1 saturates at it), twice, leaves the key denied under every
// algorithm: no count wraps.
func TestChargeLargest(t *testing.T) {
	for _, algo := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}}})
		now := time.Unix(1_700_000_000, 0)
		l.Charge("k", now, math.MaxInt64, 1)
		l.Charge("k", now, math.MaxInt64, 1)
		if d := l.AllowAt("k", now.Add(time.Minute), 1); d.Allowed {
			t.Errorf("%s: after charges of the largest count: allowed %+v", algo, d)
		}
	}
}
