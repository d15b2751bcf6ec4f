package redisstore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestConcurrentExact: 64 goroutines, each on its own connection, make 5000
// attempts on one key limited to 1000 per hour: exactly 1000 pass, on
// every algorithm.
func TestConcurrentExact(t *testing.T) {
	const workers, attempts, limit = 64, 5000, 1000
	srv, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := config(algo, limiter.Limit{Count: limit, Window: time.Hour})
			var allowed, denied, next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				s := newStore(t, newClient(t, srv.Addr), cfg)
				wg.Go(func() {
					for next.Add(1) <= attempts {
						d, err := s.Allow(t.Context(), "hot", 1)
						if err != nil {
							errs <- err
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
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if allowed.Load() != limit || denied.Load() != attempts-limit {
				t.Fatalf("allowed %d, denied %d; want %d, %d", allowed.Load(), denied.Load(), limit, attempts-limit)
			}
			if algo == limiter.SlidingLog { // one event per admission, never more than the limit
				s := newStore(t, c, cfg)
				if n, err := c.ZCard(t.Context(), s.RedisKeys("hot")[1]).Result(); err != nil || n != limit {
					t.Fatalf("log holds %d events (%v), want %d", n, err, limit)
				}
			}
		})
	}
}
