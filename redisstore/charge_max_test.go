package redisstore

import (
	"context"
	"math"
	"testing"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestChargeLargest: a charge of the largest count (a cost_header value
// past 2^63−1 saturates at it) leaves the key denied under every
// algorithm, twice over: Lua's numbers are doubles, and the count must
// not wrap.
func TestChargeLargest(t *testing.T) {
	for _, algo := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket} {
		t.Run(string(algo), func(t *testing.T) {
			s := clocked(t, config(algo, hour), &fakeClock{t: t0})
			for range 2 { // the second adds to a count already at the largest
				if err := s.Charge(context.Background(), "k", math.MaxInt64); err != nil {
					t.Fatal(err)
				}
			}
			if d := decide(t, s, "k", 1); d.Allowed {
				t.Fatalf("after a charge of the largest count: allowed %+v", d.Decision)
			}
		})
	}
}
