package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// BenchmarkAllow is one decision, round trip to a local redis-server
// included, per algorithm, on one hot key and spread over 10,000 keys.
func BenchmarkAllow(b *testing.B) {
	_, c := start(b)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "key" + strconv.Itoa(i)
	}
	ctx := context.Background()
	for _, algo := range algorithms {
		for _, spread := range []struct {
			name string
			keys []string
		}{{"one_key", keys[:1]}, {"10k_keys", keys}} {
			b.Run(string(algo)+"/"+spread.name, func(b *testing.B) {
				s := newStore(b, c, config(algo, limiter.Limit{Count: 1_000_000_000, Window: time.Hour}))
				i := 0
				for b.Loop() {
					if _, err := s.Allow(ctx, spread.keys[i%len(spread.keys)], 1); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkAllowParallel is BenchmarkAllow on one hot key from parallel
// goroutines sharing one client's pool.
func BenchmarkAllowParallel(b *testing.B) {
	_, c := start(b)
	ctx := context.Background()
	for _, algo := range algorithms {
		b.Run(string(algo), func(b *testing.B) {
			s := newStore(b, c, config(algo, limiter.Limit{Count: 1_000_000_000, Window: time.Hour}))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Allow(ctx, "hot", 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPing is the bare round trip to the same redis-server: the floor
// under BenchmarkAllow.
func BenchmarkPing(b *testing.B) {
	_, c := start(b)
	ctx := context.Background()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
