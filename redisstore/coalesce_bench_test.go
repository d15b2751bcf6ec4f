package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// delayHook holds every command for d before it is sent: a Redis further
// away than loopback, as the client sees it.
type delayHook struct{ d time.Duration }

func (h delayHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h delayHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h delayHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t := time.NewTimer(h.d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// BenchmarkHotKeyFarRedis: 16 goroutines (on GOMAXPROCS 2) (each a client waiting for its
// answer, with the 50 ms deadline Caddy gives) decide requests of one key
// on a Redis a given delay away, coalescing on or off. ns/op is the wall
// time per decision, all goroutines together; calls/op, how many calls
// each decision cost; errors/op, the share that failed (and would take
// on_store_error).
func BenchmarkHotKeyFarRedis(b *testing.B) {
	srv, _ := start(b)
	for _, delay := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		for _, coalesce := range []bool{false, true} {
			b.Run(fmt.Sprintf("delay=%s/coalesce=%v", delay, coalesce), func(b *testing.B) {
				c := newClient(b, srv.Addr)
				cfg := config(limiter.TokenBucket, limiter.Limit{Count: 1_000_000_000, Window: time.Hour})
				cfg.Coalesce = coalesce
				s := newStore(b, c, cfg)
				if _, err := s.Allow(context.Background(), "hot", 1); err != nil { // loads the script
					b.Fatal(err)
				}
				c.AddHook(delayHook{delay})
				before := s.Stats().Calls
				var failed atomic.Int64
				b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						if _, err := s.Allow(ctx, "hot", 1); err != nil {
							failed.Add(1)
						}
						cancel()
					}
				})
				b.ReportMetric(float64(s.Stats().Calls-before)/float64(b.N), "calls/op")
				b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
			})
		}
	}
}
