package limiters

import (
	"testing"
	"time"
)

// base is the benchmarks' and tests' clock: 2026-01-01 00:00:00 UTC, a
// whole number of days since the Unix epoch, so that windows of up to a
// day start there.
var base = time.Unix(1_767_225_600, 0).UTC()

// Every contender is a real limiter: at 3 per hour, a key passes 3 times
// back to back and not a 4th nor a minute later, other keys are not affected, and (if the
// store takes the time passed in) the key passes again two hours later.
func TestLimit(t *testing.T) {
	for _, c := range Contenders() {
		t.Run(c.Name, func(t *testing.T) {
			s := c.New(3, time.Hour, 100)
			for i := range 3 {
				if !s.Allow("k", base) {
					t.Fatalf("request %d denied, want allowed", i+1)
				}
			}
			if s.Allow("k", base) {
				t.Fatalf("request 4 allowed, want denied")
			}
			if !s.Allow("other", base) {
				t.Errorf("another key denied, want allowed")
			}
			if c.WallClock {
				return
			}
			if s.Allow("k", base.Add(time.Minute)) {
				t.Errorf("request 5, 1m later, allowed: want denied")
			}
			if !s.Allow("k", base.Add(2*time.Hour)) {
				t.Errorf("request 6, 2h later, denied: want allowed")
			}
		})
	}
}

// The names are the benchmarks' sub-names: unique, one per contender.
func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Contenders() {
		if c.Name == "" || seen[c.Name] {
			t.Errorf("name %q empty or repeated", c.Name)
		}
		seen[c.Name] = true
	}
	for _, want := range []string{"edgelimit/sliding_window", "edgelimit/leaky_bucket", "x-time-rate", "httprate", "uber-ratelimit"} {
		if !seen[want] {
			t.Errorf("no contender %q", want)
		}
	}
}

// Concurrent requests on one key at one time: exactly the limit passes
// (run with -race for the adapters' safety).
func TestConcurrent(t *testing.T) {
	const limit, goroutines, each = 100, 4, 100
	for _, c := range Contenders() {
		t.Run(c.Name, func(t *testing.T) {
			s := c.New(limit, time.Hour, 100)
			allowed := make(chan int, goroutines)
			for range goroutines {
				go func() {
					n := 0
					for range each {
						if s.Allow("hot", base) {
							n++
						}
					}
					allowed <- n
				}()
			}
			total := 0
			for range goroutines {
				total += <-allowed
			}
			if total != limit {
				t.Errorf("%d of %d requests allowed, want %d", total, goroutines*each, limit)
			}
		})
	}
}
