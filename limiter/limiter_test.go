package limiter

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := []Limit{{10, s1}}
	for _, c := range []struct {
		cfg  Config
		want string // "" for valid, else a substring of the error
	}{
		{Config{Limits: ok}, ""},
		{Config{Algorithm: "gcra", Limits: ok}, "unknown algorithm"},
		{Config{}, "no limit"},
		{Config{Limits: make([]Limit, MaxLimits+1)}, "at most 8"},
		{Config{Algorithm: LeakyBucket, Limits: []Limit{{1, s1}, {2, time.Minute}}}, "one limit"},
		{Config{Limits: []Limit{{0, s1}}}, "limit 0"},
		{Config{Limits: []Limit{{MaxCount + 1, s1}}}, "limit 4294967296"},
		{Config{Limits: []Limit{{1, ms - 1}}}, "window"},
		{Config{Limits: []Limit{{1, MaxWindow + 1}}}, "window"},
		{Config{Limits: []Limit{{1, ms}, {MaxCount, MaxWindow}}}, ""},
		{Config{Limits: ok, Burst: -1}, "burst -1"},
		{Config{Limits: ok, MaxDelay: s1}, "leaky_bucket only"},
		{Config{Algorithm: LeakyBucket, Limits: ok, MaxDelay: -1}, "max_delay"},
		{Config{Limits: ok, MaxKeys: -1}, "max_keys"},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one with %q", c.cfg, err, c.want)
		}
		if _, nerr := New(c.cfg); (nerr == nil) != (err == nil) {
			t.Errorf("%+v: New error %v, Validate %v", c.cfg, nerr, err)
		}
	}
}

// A request denied by one limit takes nothing from the others, and the
// limits that had room say so.
func TestMultiLimit(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{2, s1}, {3, time.Minute}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rems: []int64{1, 2}},
		{at: 0, cost: 1, ok: true, rems: []int64{0, 1}},
		{at: 0, cost: 1, ok: false, rems: []int64{0, 1}, retry: s1},
		{at: s1, cost: 1, ok: true, rems: []int64{1, 0}},
		{at: s1, cost: 1, ok: false, rems: []int64{1, 0}, retry: 59 * s1},
		{at: s1, cost: 1, ok: false, rems: []int64{1, 0}, retry: 59 * s1, op: peek},
		{at: 2 * s1, cost: 1, ok: false, rems: []int64{2, 0}, retry: 58 * s1},
		// denied by both
		{at: 2 * s1, cost: 2, ok: false, rems: []int64{2, 0}, retry: 58 * s1},
		// more than one limit: never passes, RetryAfter is the longest window
		{at: 2 * s1, cost: 3, ok: false, rems: []int64{2, 0}, retry: time.Minute},
		{at: time.Minute, cost: 2, ok: true, rems: []int64{0, 1}},
		{at: time.Minute, cost: 1, ok: false, rems: []int64{0, 1}, retry: s1},
	})
	d := l.PeekAt("k", base.Add(time.Minute), 1)
	if b := d.Binding(); b.Window != s1 || b.Remaining != 0 {
		t.Errorf("Binding = %+v, want the 1s limit with 0 remaining", b)
	}
}

// The same for every algorithm that takes several limits: the short limit
// keeps its room when the long one denies, and RetryAfter is exact.
func TestMultiLimitAllOrNothing(t *testing.T) {
	for _, algo := range allAlgorithms {
		if algo == LeakyBucket {
			continue // one limit only
		}
		t.Run(string(algo), func(t *testing.T) {
			l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{2, s1}, {3, time.Minute}}})
			l.AllowAt("k", base, 2)
			now := base.Add(2 * s1)
			if d := l.AllowAt("k", now, 1); !d.Allowed {
				t.Fatalf("third unit denied: %+v", d)
			}
			before := l.PeekAt("k", now, 1)
			d := l.AllowAt("k", now, 1)
			after := l.PeekAt("k", now, 1)
			if d.Allowed || d.Quotas[0].Remaining != 1 || d.Quotas[1].Remaining != 0 {
				t.Fatalf("fourth unit: allowed %v, remaining %d and %d; want denied, 1 and 0", d.Allowed, d.Quotas[0].Remaining, d.Quotas[1].Remaining)
			}
			if before != after || d != before {
				t.Fatalf("the denied request changed the key:\nbefore %+v\nafter  %+v\ngot    %+v", before, after, d)
			}
			// earlier first: a sliding log's expiry is not undone by going back
			if l.PeekAt("k", now.Add(d.RetryAfter-ns), 1).Allowed || !l.PeekAt("k", now.Add(d.RetryAfter), 1).Allowed {
				t.Fatalf("RetryAfter %v is not exact", d.RetryAfter)
			}
		})
	}
}

// Refund at the decision's time restores exactly what AllowAt took, whatever the state.
func TestRefund(t *testing.T) {
	configs := []Config{}
	for _, algo := range allAlgorithms {
		configs = append(configs, Config{Algorithm: algo, Limits: []Limit{{7, s1}}})
		configs = append(configs, Config{Algorithm: algo, Limits: []Limit{{7, s1}}, Burst: 4})
		if algo != LeakyBucket {
			configs = append(configs, Config{Algorithm: algo, Limits: []Limit{{7, s1}, {20, time.Minute}}})
		}
	}
	for _, cfg := range configs {
		for _, scale := range []float64{1, 0.5} {
			name := fmt.Sprintf("%s/%d_limits/burst_%d/scale_%v", cfg.Algorithm, len(cfg.Limits), cfg.Burst, scale)
			t.Run(name, func(t *testing.T) {
				l := mustNew(t, cfg)
				for i, at := range []time.Duration{0, 0, 10 * ms, 150 * ms, 999 * ms, s1, 1500 * ms, 1500 * ms, 2 * s1, 5 * s1} {
					now := base.Add(at)
					for _, cost := range []int64{1, 2} {
						before := l.PeekAt("k", now, 1)
						d := l.AllowScaledAt("k", now, cost, scale)
						if !d.Allowed {
							continue
						}
						l.Refund("k", Taken{At: now, Cost: cost, Scale: scale}, now)
						if after := l.PeekAt("k", now, 1); after != before {
							t.Fatalf("request %d at %v cost %d: refund left\n%+v\nwant\n%+v", i, at, cost, after, before)
						}
					}
					l.AllowScaledAt("k", now, 1, scale) // move on
				}
			})
		}
	}
}

// A refund in a later window gives back nothing that window did not take.
func TestRefundLater(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{3, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 3, ok: true, rem: 0, reset: s1},
		{at: s1, cost: 2, ok: true, rem: 1, reset: s1},
		{at: s1, cost: 3, op: refund}, // more than taken: down to 0
		{at: s1, cost: 0, ok: true, rem: 3, reset: s1, op: peek},
		{at: 2 * s1, cost: 1, op: refund},
		{at: s1, cost: 0, ok: true, rem: 3, reset: s1, op: peek},
		// unknown key, cost 0, negative cost: nothing
		{at: 0, cost: 1, op: refund, key: "other"},
		{at: s1, cost: -1, op: refund},
		{at: s1, cost: 1, ok: true, rem: 2, reset: s1},
		{at: s1, cost: 0, op: refund},
		{at: s1, cost: 0, ok: true, rem: 2, reset: s1, op: peek},
	})
	if l.Contains("other") {
		t.Error("Refund created a key")
	}
}

func TestScale(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 14, reset: s1, scale: 1.5},
		{at: 0, cost: 1, ok: true, rem: 3, reset: s1, scale: 0.5},
		{at: 0, cost: 3, ok: true, rem: 0, reset: s1, scale: 0.5},
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: s1, scale: 0.5},
		{at: 0, cost: 1, ok: true, rem: 4, reset: s1},
		{at: 0, cost: 0, ok: true, rem: 9, reset: s1, scale: 1.5, op: peek},
		{at: 0, cost: 0, ok: true, rem: 0, reset: s1, scale: 0.5, op: peek},
		{at: 0, cost: 5, ok: true, rem: 4, reset: s1, scale: 1.5},
		// over the scaled-down limit: only cost 0 passes
		{at: 0, cost: 0, ok: true, rem: 0, reset: s1, scale: 0.5},
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: s1, scale: 0.5},
		// below one unit still admits one
		{at: s1, cost: 1, ok: true, rem: 0, reset: s1, scale: 0.01},
		// 0, negative and NaN block, even cost 0
		{at: 2 * s1, cost: 1, ok: false, rem: 0, reset: 0, retry: s1, scale: -1},
		{at: 2 * s1, cost: 0, ok: false, rem: 0, reset: 0, retry: s1, scale: math.NaN()},
		{at: 2 * s1, cost: 1, ok: true, rem: 9, reset: s1},
	})
	// Scale 0 through AllowScaledAt (the table's 0 means 1).
	for _, algo := range allAlgorithms {
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{10, s1}}})
		if d := l.AllowScaledAt("k", base, 0, 0); d.Allowed || d.RetryAfter != s1 || d.Quotas[0] != (Quota{Window: s1, Effective: s1}) {
			t.Errorf("%s: scale 0: %+v, want blocked", algo, d)
		}
	}
	// The burst bucket scales with the limit.
	l = mustNew(t, Config{Algorithm: SlidingWindow, Limits: []Limit{{10, s1}}, Burst: 4})
	run(t, l, []tstep{
		{at: 0, cost: 2, ok: true, rem: 0, reset: 2 * s1, scale: 0.5},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 2 * s1, retry: 200 * ms, scale: 0.5},
		// units taken at half the rate took twice the time: the bucket's state
		// is a time, whatever the scale
		{at: 0, cost: 1, ok: false, rem: 0, reset: 2 * s1, retry: 100 * ms},
		{at: 0, cost: 4, ok: true, rem: 0, reset: 2 * s1, key: "k2"},
	})
}

func TestScaled(t *testing.T) {
	for _, c := range []struct {
		n     int64
		scale float64
		want  int64
	}{
		{10, 1, 10},
		{10, 1.5, 15},
		{7, 0.5, 3},
		{10, 0.001, 1},
		{100, 0.29, 29}, // 28.999999999999996 in float64
		{1000, float64(float32(0.7)), 700},
		{300, float64(float32(2.0 / 3)), 200},
		{1_000_000, float64(float32(0.007)), 7000},
		{1000, 0.9999, 999},
		{1e9, 1e10, MaxCount},
		{5, math.Inf(1), MaxCount},
		{MaxCount, 1.0000001, MaxCount},
	} {
		if got := scaled(c.n, c.scale); got != c.want {
			t.Errorf("scaled(%d, %v) = %d, want %d", c.n, c.scale, got, c.want)
		}
	}
}

func TestReconfigure(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, s1}}})
	l.AllowAt("k", base, 4)
	reconf := func(cfg Config, want bool) {
		t.Helper()
		if keeps := l.Keeps(cfg); keeps != want {
			t.Errorf("Keeps(%+v) = %v, want %v", cfg, keeps, want)
		}
		got, err := l.Reconfigure(cfg)
		if err != nil || got != want {
			t.Fatalf("Reconfigure(%+v) = %v, %v; want %v", cfg, got, err, want)
		}
	}
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{20, s1}}}, true)
	run(t, l, []tstep{{at: 0, cost: 1, ok: true, rem: 15, reset: s1}})
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{5, s1}}}, true)
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: s1},
		{at: 0, cost: 0, ok: true, rem: 0, reset: s1},
	})
	// a longer window that starts at the same instant keeps the count
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{10, 2 * s1}}, MaxKeys: 900_000}, true)
	run(t, l, []tstep{{at: 0, cost: 1, ok: true, rem: 4, reset: 2 * s1}})
	// a key bound that wants fewer shards needs a successor
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{10, 2 * s1}}, MaxKeys: 5000}, false)
	// another layout changes nothing
	reconf(Config{Algorithm: SlidingWindow, Limits: []Limit{{10, 2 * s1}}}, false)
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{10, 2 * s1}, {100, time.Hour}}}, false)
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{10, 2 * s1}}, Burst: 3}, false)
	reconf(Config{Algorithm: FixedWindow, Limits: []Limit{{10, 2 * s1}}, Shares: true}, false)
	if c := l.Config(); c.Algorithm != FixedWindow || c.Limits[0] != (Limit{10, 2 * s1}) || c.MaxKeys != 900_000 {
		t.Errorf("Config() = %+v after refused reconfigurations", c)
	}
	run(t, l, []tstep{{at: 0, cost: 1, ok: true, rem: 3, reset: 2 * s1}})
	if ok, err := l.Reconfigure(Config{Limits: []Limit{{0, s1}}}); ok || err == nil {
		t.Errorf("invalid config: %v, %v", ok, err)
	}

	// A token bucket's capacity changes in place.
	l = mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{10, s1}}, Burst: 5})
	l.AllowAt("k", base, 5)
	reconf(Config{Algorithm: TokenBucket, Limits: []Limit{{10, s1}}, Burst: 10}, true)
	run(t, l, []tstep{{at: 0, cost: 5, ok: true, rem: 0, reset: s1}})

	// The configuration is copied, not aliased.
	limits := []Limit{{10, s1}}
	l = mustNew(t, Config{Limits: limits})
	limits[0].Count = 1
	if got := l.Config().Limits[0].Count; got != 10 {
		t.Errorf("Config().Limits[0].Count = %d after the caller's slice changed, want 10", got)
	}
}

func TestDeletePeekContains(t *testing.T) {
	for _, algo := range allAlgorithms {
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{5, s1}}, Burst: 3})
		fresh := l.PeekAt("k", base, 2)
		if l.Contains("k") || l.Len() != 0 {
			t.Fatalf("%s: PeekAt created a key", algo)
		}
		if d := l.AllowAt("k", base, 2); d != fresh {
			t.Fatalf("%s: AllowAt = %+v, PeekAt said %+v", algo, d, fresh)
		}
		p1, p2 := l.PeekAt("k", base, 1), l.PeekAt("k", base, 1)
		if p1 != p2 {
			t.Fatalf("%s: PeekAt took something: %+v then %+v", algo, p1, p2)
		}
		if d := l.AllowAt("k", base, 1); d != p1 {
			t.Fatalf("%s: AllowAt = %+v, PeekAt said %+v", algo, d, p1)
		}
		if !l.Contains("k") || l.Len() != 1 {
			t.Fatalf("%s: Contains %v, Len %d after AllowAt", algo, l.Contains("k"), l.Len())
		}
		if !l.Delete("k") || l.Delete("k") || l.Contains("k") || l.Len() != 0 {
			t.Fatalf("%s: Delete did not forget the key", algo)
		}
		if d := l.AllowAt("k", base, 2); d != fresh {
			t.Fatalf("%s: after Delete: %+v, want a fresh key's %+v", algo, d, fresh)
		}
	}
}

// Windows of 1ms and 366 days, limits of 1 and 1e9 (and MaxCount): a cost
// of N fits a fresh key, one more unit does not, and it fits exactly
// RetryAfter later.
func TestExtremes(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, lim := range []Limit{{1, ms}, {1, 30 * 24 * time.Hour}, {1e9, ms}, {1e9, 30 * 24 * time.Hour}, {1e9, s1}, {MaxCount, MaxWindow}, {7, MaxWindow}} {
			if algo == SlidingLog && lim.Count > MaxLogCount {
				lim.Count = MaxLogCount
			}
			cfg := Config{Algorithm: algo, Limits: []Limit{lim}}
			if algo == LeakyBucket {
				cfg.MaxDelay = MaxWindow // a queue as long as the window: N units at once
			}
			l := mustNew(t, cfg)
			now := base.Add(123 * time.Hour) // not aligned to the longer windows
			if d := l.AllowAt("k", now, lim.Count); !d.Allowed || d.Quotas[0].Remaining != 0 && algo != LeakyBucket {
				t.Errorf("%s %v: cost N: allowed %v, Remaining %d", algo, lim, d.Allowed, d.Quotas[0].Remaining)
				continue
			}
			if algo == LeakyBucket {
				continue // a leaky bucket queues: see TestLeakyBucket
			}
			d := l.AllowAt("k", now, 1)
			longest := lim.Window
			if algo == SlidingWindow {
				longest *= 2 // the count decays through the next window
			}
			if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > longest {
				t.Errorf("%s %v: one more: allowed %v, RetryAfter %v", algo, lim, d.Allowed, d.RetryAfter)
				continue
			}
			if l.PeekAt("k", now.Add(d.RetryAfter-ns), 1).Allowed {
				t.Errorf("%s %v: allowed 1ns before RetryAfter (%v)", algo, lim, d.RetryAfter)
			}
			if !l.PeekAt("k", now.Add(d.RetryAfter), 1).Allowed {
				t.Errorf("%s %v: denied RetryAfter (%v) later", algo, lim, d.RetryAfter)
			}
		}
	}
}

// A cost beyond any limit (up to MaxInt64) is denied, RetryAfter the
// longest window, and takes nothing: no overflow lets it through.
func TestHugeCost(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, cost := range []int64{11, MaxCount, MaxCount + 1, math.MaxInt64 - 1, math.MaxInt64} {
			cfg := Config{Algorithm: algo, Limits: []Limit{{10, s1}}}
			if algo != LeakyBucket {
				cfg.Limits = append(cfg.Limits, Limit{1000, time.Minute})
			}
			l := mustNew(t, cfg)
			l.AllowAt("k", base, 1)
			before := l.PeekAt("k", base, 1)
			d := l.AllowAt("k", base, cost)
			if d.Allowed || d.RetryAfter != cfg.Limits[len(cfg.Limits)-1].Window {
				t.Errorf("%s cost %d: allowed %v, RetryAfter %v", algo, cost, d.Allowed, d.RetryAfter)
			}
			if after := l.PeekAt("k", base, 1); after != before {
				t.Errorf("%s cost %d: took something: %+v, was %+v", algo, cost, after, before)
			}
			l.Refund("k", Taken{At: base, Cost: cost, Scale: 1}, base) // gives back at most what was taken
			if d := l.PeekAt("k", base, 10); !d.Allowed {
				t.Errorf("%s: a huge refund left %+v", algo, d)
			}
		}
	}
}
