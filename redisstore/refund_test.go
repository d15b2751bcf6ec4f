package redisstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestMatchesLimiterReservations is TestMatchesLimiter for reservations
// given back later (count_status, cost_header): on a fake clock shared by
// the scripts and the in-process limiter, random interleavings of
// reservations, give-backs of some or all of a reservation's units at a
// later time, and window edges get the same decisions from Redis as from
// the limiter, on every algorithm, with two limits and with a burst
// bucket. A give-back lands where its units were taken in both (the
// limiter's refund.go), so a script that gives back into the state in
// force at the give-back's time differs within a few steps.
func TestMatchesLimiterReservations(t *testing.T) {
	_, c := start(t)
	limits := []limiter.Limit{{Count: 3, Window: 10 * time.Second}, {Count: 5, Window: 30 * time.Second}}
	eachPair(t, c, limits, 2, func(t *testing.T, s *Store, l *limiter.Limiter) {
		now := time.UnixMicro(1_767_225_600_000_000) // a day's start: windows start here
		s.clock = func() time.Time { return now }
		rng := rand.New(rand.NewPCG(36, uint64(s.cfg.Burst)))
		var inFlight []limiter.Taken
		w := int64(limits[0].Window / time.Microsecond)
		for i := range 300 {
			what := fmt.Sprintf("step %d at %v", i, now.Sub(time.UnixMicro(1_767_225_600_000_000)))
			switch r := rng.IntN(10); {
			case r < 4:
				cost := 1 + rng.Int64N(2)
				want := l.AllowAt("k", now, cost)
				got, err := s.Decide(t.Context(), "k", cost, 1)
				if err != nil {
					t.Fatal(err)
				}
				sameDecision(t, what+fmt.Sprintf(": reserve %d", cost), got.Decision, want)
				if !got.At.Equal(now) {
					t.Fatalf("%s: At %v, want %v", what, got.At, now)
				}
				if got.Allowed {
					inFlight = append(inFlight, limiter.Taken{At: got.At, Cost: cost, Scale: 1})
				}
			case r < 7 && len(inFlight) > 0:
				j := rng.IntN(len(inFlight))
				tk := inFlight[j]
				inFlight = slices.Delete(inFlight, j, j+1)
				tk.Cost = 1 + rng.Int64N(tk.Cost) // some or all of it
				l.Refund("k", tk, now)
				if err := s.Refund(t.Context(), "k", tk); err != nil {
					t.Fatal(err)
				}
				got, err := s.Peek(t.Context(), "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				sameDecision(t, what+fmt.Sprintf(": after giving back %d taken at %v", tk.Cost, tk.At.Sub(time.UnixMicro(1_767_225_600_000_000))), got, l.PeekAt("k", now, 1))
			default:
				us := now.UnixMicro()
				switch rng.IntN(4) {
				case 0: // just before the next edge
					us = max(us, us-us%w+w-1-rng.Int64N(1000))
				case 1: // just after it
					us = us - us%w + w + rng.Int64N(1000)
				default:
					us += rng.Int64N(w / 2)
				}
				now = time.UnixMicro(us)
			}
		}
	})
}
