package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestScaledMatchesLimiter: AllowScaled on Redis decides as the in-process
// limiter's AllowScaledAt, with the scale changing from request to request
// (a country's multiplier, a tier), burst or not: the same admissions,
// limits, remaining units and waits.
func TestScaledMatchesLimiter(t *testing.T) {
	scales := []float64{0.5, 0.5, 1, 0.25, 2, 0.5, 0.5, 1.5, 0.34, 1, 1, 0.5, 0.1, 0.5}
	costs := []int64{1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 8, 1, 1, 0}
	matchLimiter(t, []limiter.Limit{{Count: 9, Window: time.Hour}, {Count: 14, Window: 24 * time.Hour}}, 4, costs, scales)
}

// TestScaleZero: a scale of 0 (a country multiplied by 0) denies without
// a call, waiting the longest window, as the limiter does; a refund at it
// gives nothing back.
func TestScaleZero(t *testing.T) {
	_, c := start(t)
	s := newStore(t, c, config(limiter.FixedWindow, hour, limiter.Limit{Count: 100, Window: 24 * time.Hour}))
	d, err := s.AllowScaled(context.Background(), "k", 1, 0)
	if err != nil || d.Allowed || d.RetryAfter != 24*time.Hour || d.Len != 2 || d.Quotas[0].Limit != 0 {
		t.Fatalf("AllowScaled at 0: %+v, %v; want denied for 24h, limits 0", d, err)
	}
	if st := s.Stats(); st.Calls != 0 {
		t.Fatalf("%d calls, want none", st.Calls)
	}
	if err := s.Refund(context.Background(), "k", limiter.Taken{At: time.Now(), Cost: 1, Scale: 0}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(context.Background(), s.RedisKeys("k")...).Result(); n != 0 {
		t.Fatalf("%d keys in Redis, want none", n)
	}
}
