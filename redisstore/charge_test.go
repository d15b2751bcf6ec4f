package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestChargePastLimit: Check takes nothing; a charge of 15 units on a
// limit of 10 per 10s, at t0, takes them all; the next request is denied
// 1µs before the moment the semantics of charge.go give, and passes at
// it, on every algorithm, with a burst bucket, and with a second, longer
// limit (which the charge takes from too).
func TestChargePastLimit(t *testing.T) {
	ten := limiter.Limit{Count: 10, Window: 10 * time.Second} // a unit a second
	long := limiter.Limit{Count: 40, Window: 1000 * time.Second}
	for _, tc := range []struct {
		algo  limiter.Algorithm
		burst int64
		pass  time.Duration // after t0
	}{
		{limiter.FixedWindow, 0, 10 * time.Second},   // the window ends; the next starts at 0
		{limiter.FixedWindow, 5, 11 * time.Second},   // the burst bucket owes 15 units of 1s, holds 5
		{limiter.SlidingWindow, 0, 14 * time.Second}, // 15×(1−el/10s)+1 ≤ 10: el ≥ 4s into the next
		{limiter.SlidingLog, 0, 10 * time.Second},    // the event of 15 leaves the window
		{limiter.SlidingLog, 5, 11 * time.Second},    // as fixed_window's burst
		{limiter.TokenBucket, 0, 6 * time.Second},    // TAT t0+15s; one unit fits at 9s ahead
		{limiter.TokenBucket, 5, 11 * time.Second},   // capacity 5: at 4s ahead
		{limiter.LeakyBucket, 0, 6 * time.Second},    // the queue of 9 (9s ahead) has room
	} {
		for _, limits := range [][]limiter.Limit{{ten}, {ten, long}} {
			if tc.algo == limiter.LeakyBucket && len(limits) > 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/burst=%d/limits=%d", tc.algo, tc.burst, len(limits)), func(t *testing.T) {
				clk := &fakeClock{t: t0}
				cfg := config(tc.algo, limits...)
				if tc.burst > 0 {
					cfg.Burst = tc.burst
				}
				s := clocked(t, cfg, clk)
				ctx := context.Background()
				for range 3 {
					if d, err := s.Check(ctx, "k", 1); err != nil || !d.Allowed {
						t.Fatalf("Check: %+v, %v", d, err)
					}
				}
				if err := s.Charge(ctx, "k", 15); err != nil {
					t.Fatal(err)
				}
				if d, err := s.Check(ctx, "k", 1); err != nil || d.Allowed || d.Quotas[0].Remaining != 0 {
					t.Fatalf("Check after the charge: %+v, %v", d, err)
				}
				if len(limits) > 1 {
					if d, _ := s.Check(ctx, "k", 1); d.Quotas[1].Remaining != long.Count-15 {
						t.Fatalf("the long limit: %d left, want %d", d.Quotas[1].Remaining, long.Count-15)
					}
				}
				clk.set(t0.Add(tc.pass - time.Microsecond))
				if d := decide(t, s, "k", 1); d.Allowed {
					t.Fatalf("1µs before %s: allowed %+v", tc.pass, d.Decision)
				}
				clk.set(t0.Add(tc.pass))
				if d := decide(t, s, "k", 1); !d.Allowed {
					t.Fatalf("at %s: denied %+v", tc.pass, d.Decision)
				}
			})
		}
	}
}

// TestChargeNothing: a charge of 0 (or at scale 0) takes nothing and
// creates no key; a charge ignores a block and starts none.
func TestChargeNothing(t *testing.T) {
	clk := &fakeClock{t: t0}
	cfg := config(limiter.FixedWindow, hour)
	cfg.BlockFor = []time.Duration{time.Minute}
	s := clocked(t, cfg, clk)
	ctx := context.Background()
	if err := s.Charge(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.ChargeScaled(ctx, "k", 5, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.client.Exists(ctx, s.RedisKeys("k")...).Result(); err != nil || n != 0 {
		t.Fatalf("%d keys (%v)", n, err)
	}
	if err := s.Charge(ctx, "k", 25); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.BlockOf(ctx, "k"); b.Blocked() {
		t.Fatalf("a charge blocked: %+v", b)
	}
	if d := decide(t, s, "k", 1); d.Allowed || !d.Block.Started {
		t.Fatalf("after a charge past the limit: %+v", d)
	}
	if err := s.Charge(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Peek(ctx, "k", 0); d.Quotas[0].Remaining != 0 {
		t.Fatalf("%+v", d)
	}
}

// TestChargeTTL: a charge's keys live as long as their state matters: a
// bucket's TAT far ahead keeps the key until it.
func TestChargeTTL(t *testing.T) {
	_, c := start(t)
	s := newStore(t, c, config(limiter.TokenBucket, limiter.Limit{Count: 10, Window: time.Minute}))
	ctx := context.Background()
	if err := s.Charge(ctx, "k", 100); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, s.RedisKeys("k")[0]).Result()
	if err != nil || ttl <= 9*time.Minute || ttl > 10*time.Minute {
		t.Fatalf("PTTL %s (%v), want about 10m (100 units of 6s)", ttl, err)
	}
}
