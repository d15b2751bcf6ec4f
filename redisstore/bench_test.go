package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
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

// BenchmarkAllowParallel is BenchmarkAllow from 16 goroutines (Caddy's
// concurrent requests) sharing one client's pool, on one hot key and
// spread over 10,000 keys, each call alone on the wire or through a
// Batcher (wire=batched). trips/op is Redis round trips per decision.
func BenchmarkAllowParallel(b *testing.B) {
	_, c := start(b)
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "key" + strconv.Itoa(i)
	}
	ctx := context.Background()
	for _, algo := range []limiter.Algorithm{limiter.SlidingWindow, limiter.TokenBucket} {
		for _, spread := range []int{1, len(keys)} {
			for _, batched := range []bool{false, true} {
				wire := map[bool]string{false: "alone", true: "batched"}[batched]
				b.Run(fmt.Sprintf("%s/keys=%d/wire=%s", algo, spread, wire), func(b *testing.B) {
					cfg := config(algo, limiter.Limit{Count: 1_000_000_000, Window: time.Hour})
					var stats BatchCounters
					cfg.Batcher = NewBatcher(c, BatcherConfig{MaxBatch: map[bool]int{false: 1, true: 0}[batched], Counters: &stats})
					s := newStore(b, c, cfg)
					var next atomic.Int64
					b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := s.Allow(ctx, keys[int(next.Add(1))%spread], 1); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.ReportMetric(float64(stats.RoundTrips.Load())/float64(b.N), "trips/op")
				})
			}
		}
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

// BenchmarkFeatures is each new script's round trip beside the existing
// decision's, on one key: Allow without blocks (the base), Decide with
// blocks on a key that is not blocked (the block's HMGET added), Decide
// on a blocked key, Check (the peek before a request charged after),
// Charge, and a lease's Acquire with its Release.
func BenchmarkFeatures(b *testing.B) {
	_, c := start(b)
	ctx := context.Background()
	big := limiter.Limit{Count: 1_000_000_000, Window: time.Hour}
	plain := newStore(b, c, config(limiter.SlidingWindow, big))
	cfg := config(limiter.SlidingWindow, big)
	cfg.BlockFor = []time.Duration{time.Hour}
	blocking := newStore(b, c, cfg)
	cfg = config(limiter.SlidingWindow, limiter.Limit{Count: 1, Window: time.Hour})
	cfg.BlockFor = []time.Duration{time.Hour}
	cfg.KeyPrefix = "bench:blocked:"
	blocked := newStore(b, c, cfg)
	blocked.Allow(ctx, "k", 2) // blocked for an hour
	leases, err := NewLeases(c, LeaseConfig{Max: 1_000_000, KeyPrefix: "bench:lease:"})
	if err != nil {
		b.Fatal(err)
	}
	defer leases.Close()
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"allow", func() error { _, err := plain.Allow(ctx, "k", 1); return err }},
		{"decide_blocks", func() error { _, err := blocking.Decide(ctx, "k", 1, 1); return err }},
		{"decide_blocked", func() error { _, err := blocked.Decide(ctx, "k", 1, 1); return err }},
		{"check", func() error { _, err := plain.Check(ctx, "k", 1); return err }},
		{"charge", func() error { return plain.Charge(ctx, "k", 1) }},
		{"acquire_release", func() error {
			x, _, err := leases.Acquire(ctx, "k")
			if err == nil {
				err = x.Release(ctx)
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRenewAll is one renewal tick of 1,000 and 5,000 live leases:
// one pipelined call.
func BenchmarkRenewAll(b *testing.B) {
	_, c := start(b)
	ctx := context.Background()
	for _, n := range []int{1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			l, err := NewLeases(c, LeaseConfig{Max: 10, KeyPrefix: "bench:renew:" + strconv.Itoa(n) + ":"})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			for i := range n {
				if x, _, err := l.Acquire(ctx, "k"+strconv.Itoa(i)); err != nil || x == nil {
					b.Fatal(x, err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if lost, err := l.RenewAll(ctx); err != nil || lost != 0 {
					b.Fatal(lost, err)
				}
			}
		})
	}
}
