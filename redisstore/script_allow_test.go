package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestAllowScriptSameAsWhole: for the configs that have an allow script,
// it replies and writes exactly what the whole script does for the same
// call: two keys driven by one random sequence of costs, scales and
// steps of a fake clock, one through each script, agree after every
// call on the reply, the hash and its TTL.
func TestAllowScriptSameAsWhole(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	limits := []limiter.Limit{{Count: 10, Window: time.Second}, {Count: 25, Window: 7 * time.Second}, {Count: 1000, Window: time.Hour}}
	for _, algo := range []limiter.Algorithm{limiter.SlidingWindow, limiter.FixedWindow} {
		for n := 1; n <= len(limits); n++ {
			t.Run(fmt.Sprintf("%s/limits=%d", algo, n), func(t *testing.T) {
				s := newStore(t, c, config(algo, limits[:n]...))
				if s.allow == nil {
					t.Fatal("no allow script")
				}
				now := time.Date(2026, 12, 4, 13, 0, 0, 123456000, time.UTC)
				s.clock = func() time.Time { return now }
				whole, alone := s.RedisKeys("whole"), s.RedisKeys("allow")
				rng := rand.New(rand.NewPCG(1, uint64(n)))
				costs := []int64{0, 1, 1, 1, 2, 3, 9, 11, limiter.MaxCount + 1}
				scales := []float64{1, 1, 1, 0.5, 2, 0.3}
				for i := range 600 {
					now = now.Add(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
					if rng.IntN(50) == 0 {
						now = now.Add(-time.Duration(rng.Int64N(int64(time.Second)))) // the clock steps back
					}
					call := s.call("", "a", costs[rng.IntN(len(costs))], 1, scales[rng.IntN(len(scales))], false)
					if call.script != s.allow {
						t.Fatal("an allow of one request did not take the allow script")
					}
					want, err := s.script.run(ctx, c, whole, call.argv()...).Result()
					if err != nil {
						t.Fatal(err)
					}
					got, err := s.allow.run(ctx, c, alone, call.argv()...).Result()
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("call %d %v: allow script %v, whole script %v", i, call.argv(), got, want)
					}
					hw, ha := c.HGetAll(ctx, whole[0]).Val(), c.HGetAll(ctx, alone[0]).Val()
					if !reflect.DeepEqual(ha, hw) {
						t.Fatalf("call %d %v: allow script's hash %v, whole script's %v", i, call.argv(), ha, hw)
					}
					tw, ta := c.PTTL(ctx, whole[0]).Val(), c.PTTL(ctx, alone[0]).Val()
					if d := ta - tw; d < -50*time.Millisecond || d > 50*time.Millisecond {
						t.Fatalf("call %d: allow script's key lives %v, whole script's %v", i, ta, tw)
					}
				}
			})
		}
	}
}

// TestAllowScriptOnlyWhenSimple: the allow script is made for window
// algorithms without burst, blocks or calendar limits, and serves only
// "a" of one request; the rest take the whole script.
func TestAllowScriptOnlyWhenSimple(t *testing.T) {
	one := []limiter.Limit{{Count: 10, Window: time.Second}}
	day := []limiter.Limit{{Count: 10, Window: 24 * time.Hour}}
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"sliding_window", Config{Limits: one}, true},
		{"fixed_window", Config{Algorithm: limiter.FixedWindow, Limits: one}, true},
		{"burst", Config{Limits: one, Burst: 3}, false},
		{"blocks", Config{Limits: one, BlockFor: []time.Duration{time.Minute}}, false},
		{"calendar", Config{Limits: day, Periods: []limiter.Period{limiter.Day}}, false},
		{"sliding_log", Config{Algorithm: limiter.SlidingLog, Limits: one}, false},
		{"token_bucket", Config{Algorithm: limiter.TokenBucket, Limits: one}, false},
		{"leaky_bucket", config(limiter.LeakyBucket, one...), false},
	} {
		s, err := New(newClient(t, "127.0.0.1:1"), tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.allow != nil; got != tc.want {
			t.Errorf("%s: allow script %v, want %v", tc.name, got, tc.want)
		}
		if s.allow == nil {
			continue
		}
		for _, op := range []struct {
			op string
			n  int
		}{{"a", 2}, {"p", 1}, {"r", 1}, {"t", 1}} {
			if s.call("k", op.op, 1, op.n, 1, false).script != s.script {
				t.Errorf("%s: %q of %d requests does not take the whole script", tc.name, op.op, op.n)
			}
		}
	}
}
