package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// The exactness runs: workers goroutines make attempts in all on one key
// limited to limit an hour.
const workers, attempts, limit = 64, 5000, 1000

// TestConcurrentExact: 64 goroutines, each on its own connection, make 5000
// attempts on one key limited to 1000 per hour: exactly 1000 pass, on
// every algorithm.
func TestConcurrentExact(t *testing.T) {
	srv, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := config(algo, limiter.Limit{Count: limit, Window: time.Hour})
			hammer(t, func() *Store { return newStore(t, newClient(t, srv.Addr), cfg) })
			if algo == limiter.SlidingLog { // one event per admission, never more than the limit
				s := newStore(t, c, cfg)
				if n, err := c.ZCard(t.Context(), s.RedisKeys("hot")[1]).Result(); err != nil || n != limit {
					t.Fatalf("log holds %d events (%v), want %d", n, err, limit)
				}
			}
		})
	}
}

// hammer runs the exactness run, each worker on the Store store gives it,
// each attempt with a deadline of 5 s, and fails t unless exactly limit
// pass and no call fails.
func hammer(t *testing.T, store func() *Store) {
	t.Helper()
	var allowed, denied, next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		s := store()
		wg.Go(func() {
			for next.Add(1) <= attempts {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				d, err := s.Allow(ctx, "hot", 1)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != limit || denied.Load() != attempts-limit {
		t.Fatalf("allowed %d, denied %d; want %d, %d", allowed.Load(), denied.Load(), limit, attempts-limit)
	}
}
