package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// TestAllowCountsDown: N per hour admits exactly N, Remaining counting
// down by one, then denies with a RetryAfter.
func TestAllowCountsDown(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, hour))
			for i := range hour.Count {
				d := allow(t, s, "k", 1)
				if !d.Allowed {
					t.Fatalf("request %d denied: %+v", i+1, d)
				}
				if got, want := d.Quotas[0].Remaining, hour.Count-1-i; got != want {
					t.Fatalf("request %d: remaining %d, want %d", i+1, got, want)
				}
				if d.Quotas[0].Limit != hour.Count || d.Quotas[0].Window != time.Hour || d.Len != 1 {
					t.Fatalf("request %d: quota %+v, len %d", i+1, d.Quotas[0], d.Len)
				}
				if d.Quotas[0].Reset <= 0 || d.Quotas[0].Reset > 2*time.Hour {
					t.Fatalf("request %d: reset %s", i+1, d.Quotas[0].Reset)
				}
			}
			for i := range 3 {
				d := allow(t, s, "k", 1)
				if d.Allowed || d.Quotas[0].Remaining != 0 {
					t.Fatalf("request %d after the limit: %+v", i+1, d)
				}
				if d.RetryAfter <= 0 || d.RetryAfter > 2*time.Hour {
					t.Fatalf("retry after %s", d.RetryAfter)
				}
			}
			if d := allow(t, s, "other", 1); !d.Allowed {
				t.Fatalf("another key denied: %+v", d)
			}
		})
	}
}

// TestLeakyDelay: a leaky bucket's queued requests wait their turn.
func TestLeakyDelay(t *testing.T) {
	_, c := start(t)
	s := newStore(t, c, config(limiter.LeakyBucket, hour))
	unit := time.Hour / time.Duration(hour.Count)
	for i := range hour.Count {
		d := allow(t, s, "k", 1)
		want := time.Duration(i) * unit
		if !d.Allowed || d.Delay > want || d.Delay < want-time.Minute {
			t.Fatalf("request %d: delay %s, want about %s (%+v)", i+1, d.Delay, want, d)
		}
	}
}

// TestMatchesLimiter: the same requests on the same limits get the same
// decisions from Redis as from the in-process limiter, with and without a
// burst (windows long enough that the milliseconds between the two do not
// matter: Reset and RetryAfter agree within a second).
func TestMatchesLimiter(t *testing.T) {
	costs := []int64{1, 2, 1, 3, 1, 1, 2, 1, 1, 0, 8, 1}
	matchLimiter(t, []limiter.Limit{{Count: 7, Window: time.Hour}, {Count: 12, Window: 24 * time.Hour}}, 3, costs, nil)
}

// matchLimiter sends the requests of costs (at scales, or 1) to a Store and
// to an in-process limiter of the same limits, on every algorithm (the
// leaky bucket with the first limit only), with no burst and with burst,
// and compares each decision.
func matchLimiter(t *testing.T, limits []limiter.Limit, burst int64, costs []int64, scales []float64) {
	_, c := start(t)
	eachPair(t, c, limits, burst, func(t *testing.T, s *Store, l *limiter.Limiter) {
		for i, cost := range costs {
			scale := 1.0
			if scales != nil {
				scale = scales[i]
			}
			want := l.AllowScaledAt("k", time.Now(), cost, scale)
			got, err := s.AllowScaled(t.Context(), "k", cost, scale)
			if err != nil {
				t.Fatal(err)
			}
			sameDecision(t, fmt.Sprintf("Test %d (cost %d, scale %v)", i, cost, scale), got, want)
			sameEffective(t, fmt.Sprintf("Test %d (cost %d, scale %v)", i, cost, scale), s.cfg, got, want)
		}
	})
}

// eachPair runs f, in a subtest per algorithm and burst (none, and
// burst), on a Store on c and an in-process limiter of the same limits
// (the leaky bucket's the first limit only).
func eachPair(t *testing.T, c *redis.Client, limits []limiter.Limit, burst int64, f func(t *testing.T, s *Store, l *limiter.Limiter)) {
	for _, algo := range algorithms {
		for _, burst := range []int64{0, burst} {
			t.Run(fmt.Sprintf("%s/burst=%d", algo, burst), func(t *testing.T) {
				cfg := config(algo, limits...)
				if algo == limiter.LeakyBucket {
					cfg = config(algo, limits[0])
				}
				if burst > 0 {
					cfg.Burst = burst
				}
				l, err := limiter.New(limiter.Config{Algorithm: algo, Limits: cfg.Limits, Burst: cfg.Burst, MaxDelay: cfg.MaxDelay})
				if err != nil {
					t.Fatal(err)
				}
				f(t, newStore(t, c, cfg), l)
			})
		}
	}
}

// sameDecision fails the test unless Redis's decision got is the
// limiter's want: the same admission, limits and remaining units, and
// waits within a second.
func sameDecision(t *testing.T, what string, got, want limiter.Decision) {
	t.Helper()
	if got.Allowed != want.Allowed || got.Len != want.Len {
		t.Fatalf("%s: allowed %v, want %v", what, got.Allowed, want.Allowed)
	}
	if !near(got.RetryAfter, want.RetryAfter) || !near(got.Delay, want.Delay) {
		t.Fatalf("%s: retry after %s delay %s, want %s %s", what, got.RetryAfter, got.Delay, want.RetryAfter, want.Delay)
	}
	for j := range got.Len {
		g, w := got.Quotas[j], want.Quotas[j]
		if g.Remaining != w.Remaining || g.Limit != w.Limit || !near(g.Reset, w.Reset) {
			t.Fatalf("%s: limit %d: %+v, want %+v", what, j, g, w)
		}
	}
}

// sameEffective fails the test unless Redis's effective windows are the
// limiter's, within a second, where the reply says enough to derive them
// (fixed_window without a burst bucket, token_bucket, leaky_bucket), and
// never a second earlier than the limiter's elsewhere.
func sameEffective(t *testing.T, what string, cfg Config, got, want limiter.Decision) {
	t.Helper()
	exact := cfg.Algorithm == limiter.TokenBucket || cfg.Algorithm == limiter.LeakyBucket ||
		cfg.Algorithm == limiter.FixedWindow && cfg.Burst == 0
	for j := range got.Len {
		g, w := got.Quotas[j].Effective, want.Quotas[j].Effective
		if exact && !near(g, w) || !exact && g < w-time.Second {
			t.Fatalf("%s: limit %d: effective window %s, want %s", what, j, g, w)
		}
	}
}

// near is true if a and b are within a second, and both zero or neither.
func near(a, b time.Duration) bool {
	return (a == 0) == (b == 0) && (a-b).Abs() <= time.Second
}

// TestPeekReset: Peek decides without taking; Reset makes a key whole.
func TestPeekReset(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, hour))
			allow(t, s, "k", 4)
			for range 3 {
				d, err := s.Peek(ctx, "k", 1)
				if err != nil || !d.Allowed || d.Quotas[0].Remaining != 5 {
					t.Fatalf("Peek: %+v, %v; want allowed, 5 remaining", d, err)
				}
			}
			if d, err := s.Peek(ctx, "k", 11); err != nil || d.Allowed {
				t.Fatalf("Peek of 11: %+v, %v; want denied", d, err)
			}
			if err := s.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d := allow(t, s, "k", 1); d.Quotas[0].Remaining != hour.Count-1 {
				t.Fatalf("after Reset: %+v", d)
			}
		})
	}
}

// TestAllOrNothing: a request denied by the second limit takes nothing
// from the first.
func TestAllOrNothing(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		if algo == limiter.LeakyBucket {
			continue // one limit only
		}
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, limiter.Limit{Count: 10, Window: time.Hour}, limiter.Limit{Count: 3, Window: 24 * time.Hour}))
			for i := range 3 {
				if d := allow(t, s, "k", 1); !d.Allowed {
					t.Fatalf("request %d denied: %+v", i+1, d)
				}
			}
			for i := range 5 {
				d := allow(t, s, "k", 1)
				if d.Allowed {
					t.Fatalf("request %d over the daily limit allowed", i+1)
				}
				if d.Quotas[0].Remaining != 7 || d.Quotas[1].Remaining != 0 {
					t.Fatalf("denied request %d: remaining %d, %d; want 7, 0", i+1, d.Quotas[0].Remaining, d.Quotas[1].Remaining)
				}
			}
		})
	}
}

// TestCost: a request of several units takes them all or none. (A leaky
// bucket queues requests, not units: TestMatchesLimiter covers its costs.)
func TestCost(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		if algo == limiter.LeakyBucket {
			continue
		}
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, hour))
			for i, tc := range []struct {
				cost    int64
				allowed bool
				remain  int64
			}{
				{4, true, 6}, {4, true, 2}, {4, false, 2}, {2, true, 0}, {1, false, 0}, {0, true, 0}, {11, false, 0},
			} {
				d := allow(t, s, "k", tc.cost)
				if d.Allowed != tc.allowed || d.Quotas[0].Remaining != tc.remain {
					t.Fatalf("Test %d: cost %d: allowed %v remaining %d, want %v %d", i, tc.cost, d.Allowed, d.Quotas[0].Remaining, tc.allowed, tc.remain)
				}
			}
			if d := allow(t, s, "k2", 11); d.Allowed || d.RetryAfter != time.Hour {
				t.Fatalf("cost above the limit: %+v, want denied with retry 1h", d)
			}
		})
	}
}

// TestRefund: units given back (each decision's, at its time) can be
// taken again; a refund of a key that holds nothing creates nothing.
func TestRefund(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, hour))
			at := time.Now()
			s.clock = func() time.Time { return at } // a bucket refills meanwhile
			var took []time.Time
			for range hour.Count {
				d, err := s.Decide(ctx, "k", 1, 1)
				if err != nil || !d.Allowed {
					t.Fatalf("Decide: %+v, %v", d, err)
				}
				took = append(took, d.At)
			}
			for _, at := range took[:3] {
				if err := s.Refund(ctx, "k", limiter.Taken{At: at, Cost: 1, Scale: 1}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				if d := allow(t, s, "k", 1); !d.Allowed {
					t.Fatalf("request %d after refund denied: %+v", i+1, d)
				}
			}
			if d := allow(t, s, "k", 1); d.Allowed {
				t.Fatal("more allowed than refunded")
			}
			if err := s.Refund(ctx, "none", limiter.Taken{At: time.Now(), Cost: 1, Scale: 1}); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Exists(ctx, s.RedisKeys("none")...).Result(); err != nil || n != 0 {
				t.Fatalf("refund created %d keys (%v)", n, err)
			}
		})
	}
}

// TestTTL: every key expires, within the time its state matters.
func TestTTL(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			limits := []limiter.Limit{{Count: 10, Window: time.Minute}, {Count: 50, Window: time.Hour}}
			if algo == limiter.LeakyBucket {
				limits = limits[:1]
			}
			longest := limits[len(limits)-1].Window
			if algo == limiter.SlidingWindow {
				longest *= 2 // the previous window's count still weighs
			}
			if algo == limiter.LeakyBucket {
				longest = limits[0].Window // the queue of Count−1 drains in less
			}
			s := newStore(t, c, config(algo, limits...))
			allow(t, s, "k", 3)
			for _, k := range s.RedisKeys("k") {
				ttl, err := c.PTTL(ctx, k).Result()
				if err != nil || ttl <= 0 || ttl > longest {
					t.Fatalf("%s: PTTL %s (%v), want in (0, %s]", k, ttl, err, longest)
				}
			}
		})
	}
}

// TestNoScript: after SCRIPT FLUSH the store loads its script again and
// keeps counting where it was.
func TestNoScript(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			s := newStore(t, c, config(algo, hour))
			for i := range hour.Count {
				if i == 4 {
					if err := c.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if d := allow(t, s, "k", 1); !d.Allowed || d.Quotas[0].Remaining != hour.Count-1-i {
					t.Fatalf("request %d: %+v", i+1, d)
				}
			}
			if d := allow(t, s, "k", 1); d.Allowed {
				t.Fatal("allowed past the limit")
			}
		})
	}
}

// TestConfigErrors: New refuses what Redis cannot keep.
func TestConfigErrors(t *testing.T) {
	_, c := start(t)
	for i, cfg := range []Config{
		{},
		{Algorithm: "nope", Limits: []limiter.Limit{hour}},
		{Limits: []limiter.Limit{{Count: 1, Window: time.Millisecond + time.Nanosecond}}},
		{Limits: []limiter.Limit{hour}, KeyPrefix: "a{b"},
		{Algorithm: limiter.LeakyBucket, Limits: []limiter.Limit{hour, hour}},
	} {
		if _, err := New(c, cfg); err == nil {
			t.Errorf("Test %d: %+v: no error", i, cfg)
		}
	}
	if _, err := New(nil, Config{Limits: []limiter.Limit{hour}}); err == nil {
		t.Error("nil client: no error")
	}
}
