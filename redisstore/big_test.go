package redisstore

import (
	"testing"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestLargeLimits: the largest limit on the longest window, where
// count×window(µs) is past 2^53 and Lua's doubles are no longer exact,
// still counts down by the unit.
func TestLargeLimits(t *testing.T) {
	_, c := start(t)
	for _, algo := range []limiter.Algorithm{limiter.SlidingWindow, limiter.FixedWindow, limiter.TokenBucket} {
		t.Run(string(algo), func(t *testing.T) {
			l := limiter.Limit{Count: limiter.MaxCount, Window: limiter.MaxWindow}
			s := newStore(t, c, config(algo, l))
			remaining := l.Count
			for i, tc := range []struct {
				cost    int64
				allowed bool
			}{{1, true}, {1000, true}, {1 << 20, true}, {limiter.MaxCount, false}, {limiter.MaxCount + 1, false}} {
				d := allow(t, s, "k", tc.cost)
				if tc.allowed {
					remaining -= tc.cost
				}
				if d.Allowed != tc.allowed || d.Quotas[0].Remaining != remaining {
					t.Fatalf("Test %d: cost %d: allowed %v remaining %d, want %v %d", i, tc.cost, d.Allowed, d.Quotas[0].Remaining, tc.allowed, remaining)
				}
			}
		})
	}
}
