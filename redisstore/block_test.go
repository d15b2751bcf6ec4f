package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// fakeClock is the time a test sets for a Store's scripts (and its
// over-limit cache), stepped exactly.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// t0 is a whole 1000 s of Unix time: every window of the tests starts there.
var t0 = time.Unix(2_000_000_000, 0)

// clocked is newStore with its scripts on clk.
func clocked(t testing.TB, c Config, clk *fakeClock) *Store {
	t.Helper()
	_, cl := start(t)
	s := newStore(t, cl, c)
	s.clock, s.now = clk.now, clk.now
	return s
}

func decide(t testing.TB, s *Store, key string, cost int64) Decision {
	t.Helper()
	d, err := s.Decide(context.Background(), key, cost, 1)
	if err != nil {
		t.Fatalf("Decide(%q, %d): %v", key, cost, err)
	}
	return d
}

var escalation = []time.Duration{time.Minute, 10 * time.Minute, time.Hour}

// TestBlockEscalates: a denial blocks the key for the first duration;
// each denial after a block ends (within block_reset) starts the next
// level, the last one repeating; a block ends to the microsecond; a
// blocked request is denied for the rest of the block, takes nothing and
// starts nothing.
func TestBlockEscalates(t *testing.T) {
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			clk := &fakeClock{t: t0}
			cfg := config(algo, limiter.Limit{Count: 2, Window: time.Hour})
			cfg.BlockFor = escalation
			s := clocked(t, cfg, clk)
			if d := decide(t, s, "k", 1); !d.Allowed || d.Block != (Block{}) {
				t.Fatalf("first request: %+v", d)
			}
			at := t0
			for n, dur := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, time.Hour, time.Hour} {
				// cost 3 is above the limit: denied whatever the counters
				d := decide(t, s, "k", 3)
				want := Block{Until: at.Add(dur), Offences: int64(n + 1), Started: true}
				if d.Allowed || d.Block != want || d.RetryAfter != max(dur, time.Hour) {
					t.Fatalf("offence %d: %+v, block %+v; want %+v, retry %s", n+1, d.Decision, d.Block, want, max(dur, time.Hour))
				}
				clk.set(at.Add(dur - time.Microsecond))
				d = decide(t, s, "k", 1)
				want.Started = false
				if d.Allowed || d.Block != want || d.RetryAfter != time.Microsecond || d.Quotas[0].Remaining != 0 {
					t.Fatalf("offence %d, 1µs before its end: %+v, block %+v; want blocked for 1µs", n+1, d.Decision, d.Block)
				}
				if b, err := s.BlockOf(context.Background(), "k"); err != nil || b != want {
					t.Fatalf("BlockOf: %+v, %v; want %+v", b, err, want)
				}
				at = at.Add(dur)
				clk.set(at)
			}
			if b, err := s.BlockOf(context.Background(), "k"); err != nil || b != (Block{Offences: 5}) {
				t.Fatalf("BlockOf after the last block ended: %+v, %v", b, err)
			}
		})
	}
}

// TestBlockTakesNothing: while blocked, nothing is taken; once it ends the
// key has what it had.
func TestBlockTakesNothing(t *testing.T) {
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			clk := &fakeClock{t: t0}
			cfg := config(algo, limiter.Limit{Count: 5, Window: time.Hour})
			cfg.BlockFor = []time.Duration{time.Millisecond}
			s := clocked(t, cfg, clk)
			decide(t, s, "k", 1)
			if d := decide(t, s, "k", 6); !d.Block.Started {
				t.Fatalf("cost 6 of 5: %+v", d)
			}
			for range 10 {
				if d := decide(t, s, "k", 1); d.Allowed || !d.Block.Blocked() {
					t.Fatalf("blocked key: %+v", d)
				}
			}
			clk.set(t0.Add(time.Millisecond))
			d, err := s.Peek(context.Background(), "k", 1)
			if err != nil || !d.Allowed || d.Quotas[0].Remaining != 3 {
				t.Fatalf("after the block: %+v, %v; want 3 left (4 before this one)", d, err)
			}
		})
	}
}

// TestBlockReset: offences are forgotten block_reset after the last block
// ended, to the microsecond.
func TestBlockReset(t *testing.T) {
	clk := &fakeClock{t: t0}
	cfg := config(limiter.FixedWindow, limiter.Limit{Count: 2, Window: time.Hour})
	cfg.BlockFor, cfg.BlockReset = escalation, 2*time.Hour
	s := clocked(t, cfg, clk)
	for _, tc := range []struct {
		key   string
		after time.Duration // after the first block's end
		want  int64         // the offences of the next block
	}{{"remembered", 2*time.Hour - time.Microsecond, 2}, {"forgotten", 2 * time.Hour, 1}} {
		clk.set(t0)
		decide(t, s, tc.key, 3)
		end := t0.Add(time.Minute)
		clk.set(end.Add(tc.after))
		if d := decide(t, s, tc.key, 3); d.Block.Offences != tc.want || d.Block.Until != end.Add(tc.after).Add(escalation[tc.want-1]) {
			t.Fatalf("%s: %+v, want offence %d", tc.key, d.Block, tc.want)
		}
	}
}

// TestBlockLift: Reset lifts a block, forgets its offences and the
// counters, and clears this node's over-limit cache, which had kept the
// block's denial.
func TestBlockLift(t *testing.T) {
	clk := &fakeClock{t: t0}
	cfg := config(limiter.SlidingLog, limiter.Limit{Count: 2, Window: time.Hour})
	cfg.BlockFor, cfg.OverLimitCacheKeys = escalation, 100
	s := clocked(t, cfg, clk)
	ctx := context.Background()
	decide(t, s, "k", 2)
	if d := decide(t, s, "k", 1); !d.Block.Started {
		t.Fatalf("denial: %+v", d.Block)
	}
	clk.set(t0.Add(time.Second / 2)) // a denial is cached for 1s at most
	d := decide(t, s, "k", 1)
	if st := s.Stats(); st.OverLimitCached != 1 || d.Allowed || d.Block.Started || d.Block.Until != t0.Add(time.Minute) || d.RetryAfter != time.Hour-time.Second/2 {
		t.Fatalf("cached: %+v %+v, stats %+v", d.Decision, d.Block, st)
	}
	if err := s.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if b, err := s.BlockOf(ctx, "k"); err != nil || b != (Block{}) {
		t.Fatalf("after the lift: %+v, %v", b, err)
	}
	if d := decide(t, s, "k", 1); !d.Allowed || d.Quotas[0].Remaining != 1 || d.Block != (Block{}) {
		t.Fatalf("after the lift: %+v %+v", d.Decision, d.Block)
	}
	decide(t, s, "k", 1)
	if d := decide(t, s, "k", 1); d.Block.Offences != 1 || d.Block.Until != t0.Add(time.Second/2+time.Minute) {
		t.Fatalf("the first offence after a lift: %+v", d.Block)
	}
}

// TestBlockPeekCheck: Peek reports a block but starts none; Check starts
// one when it denies.
func TestBlockPeekCheck(t *testing.T) {
	clk := &fakeClock{t: t0}
	cfg := config(limiter.TokenBucket, limiter.Limit{Count: 1, Window: time.Hour})
	cfg.BlockFor = escalation
	s := clocked(t, cfg, clk)
	ctx := context.Background()
	decide(t, s, "k", 1)
	if d, err := s.Peek(ctx, "k", 1); err != nil || d.Allowed {
		t.Fatalf("Peek: %+v, %v", d, err)
	}
	if b, _ := s.BlockOf(ctx, "k"); b.Blocked() {
		t.Fatalf("Peek started a block: %+v", b)
	}
	d, err := s.Check(ctx, "k", 1)
	if err != nil || d.Allowed || d.Block != (Block{Until: t0.Add(time.Minute), Offences: 1, Started: true}) {
		t.Fatalf("Check: %+v %+v, %v", d.Decision, d.Block, err)
	}
	if d, err := s.Peek(ctx, "k", 1); err != nil || d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("Peek of a blocked key: %+v, %v", d, err)
	}
}

// TestBlockedList: Blocked lists the keys blocked now, whatever their
// bytes, up to its limit, and passes over those whose block ended.
func TestBlockedList(t *testing.T) {
	clk := &fakeClock{t: t0}
	cfg := config(limiter.FixedWindow, limiter.Limit{Count: 1, Window: time.Hour})
	cfg.BlockFor = []time.Duration{time.Minute}
	cfg.KeyPrefix = "test:list*[x]:"
	s := clocked(t, cfg, clk)
	ctx := context.Background()
	keys := []string{"a", "{b}%", "", string(make([]byte, 300))}
	for _, k := range append(keys, "old") {
		if k == "old" {
			clk.set(t0.Add(-time.Hour))
		} else {
			clk.set(t0)
		}
		decide(t, s, k, 2)
	}
	clk.set(t0)
	got, err := s.Blocked(ctx, 100)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("Blocked: %d keys %+v, %v; want %d", len(got), got, err, len(keys))
	}
	seen := map[string]bool{}
	for _, b := range got {
		seen[b.Key] = b.Until == t0.Add(time.Minute) && b.Offences == 1
	}
	for _, k := range keys[:3] {
		if !seen[k] {
			t.Fatalf("%q not listed right: %+v", k, got)
		}
	}
	if !seen[Escape(keys[3])] {
		t.Fatalf("the long key not listed by its hash: %+v", got)
	}
	if got, err := s.Blocked(ctx, 2); err != nil || len(got) != 2 {
		t.Fatalf("Blocked(2): %+v, %v", got, err)
	}
}

// TestBlockCoalesced: of coalesced requests sharing the denial that
// started a block, one sees Started.
func TestBlockCoalesced(t *testing.T) {
	f := &flight{ds: []Decision{{Block: Block{Started: true, Offences: 1}}}}
	for i, want := range []bool{true, false, false} {
		if d, _ := f.decision(i); d.Block.Started != want || d.Block.Offences != 1 {
			t.Fatalf("request %d: %+v", i, d.Block)
		}
	}
}

// TestBlockConfig: New refuses bad durations.
func TestBlockConfig(t *testing.T) {
	for i, c := range []Config{
		{Limits: []limiter.Limit{hour}, BlockFor: []time.Duration{0}},
		{Limits: []limiter.Limit{hour}, BlockFor: []time.Duration{time.Nanosecond}},
		{Limits: []limiter.Limit{hour}, BlockFor: []time.Duration{time.Minute}, BlockReset: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Test %d: %+v: no error", i, c)
		}
	}
}
