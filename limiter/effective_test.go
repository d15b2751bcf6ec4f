package limiter

import (
	"testing"
	"time"
)

// estep is one row of an effective-window table: at offset at, key "k"
// asks for cost units, and the first limit must report exactly rem units
// left and an effective window of eff; retry is RetryAfter.
type estep struct {
	at    time.Duration
	cost  int64
	ok    bool
	rem   int64
	eff   time.Duration
	retry time.Duration
	scale float64 // AllowScaledAt with this scale if not 0
}

// runEffective plays steps on l, checking Allowed, Remaining, Effective
// and RetryAfter, and that a denial's RetryAfter is never before its
// Effective ends (draft-11 §6).
func runEffective(t *testing.T, l *Limiter, steps []estep) {
	t.Helper()
	for i, s := range steps {
		scale := s.scale
		if scale == 0 {
			scale = 1
		}
		d := l.AllowScaledAt("k", base.Add(s.at), s.cost, scale)
		q := d.Quotas[0]
		if d.Allowed != s.ok || q.Remaining != s.rem || q.Effective != s.eff || d.RetryAfter != s.retry {
			t.Errorf("step %d: at %v cost %d: allowed %v r=%d eff=%v (%d) retry=%v, want %v r=%d eff=%v retry=%v",
				i, s.at, s.cost, d.Allowed, q.Remaining, q.Effective, q.Effective, d.RetryAfter, s.ok, s.rem, s.eff, s.retry)
		}
		if !d.Allowed && d.RetryAfter < q.Effective {
			t.Errorf("step %d: RetryAfter %v before the effective window's end %v", i, d.RetryAfter, q.Effective)
		}
	}
}

func TestEffectiveWindow(t *testing.T) {
	const s = time.Second
	const ms = time.Millisecond
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []estep
	}{{
		name: "fixed_window: the window's end",
		cfg:  Config{Algorithm: FixedWindow, Limits: []Limit{{5, 10 * s}}},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 4, eff: 10 * s},
			{at: 9900 * ms, cost: 4, ok: true, rem: 0, eff: 100 * ms},
			{at: 9900 * ms, cost: 1, rem: 0, eff: 100 * ms, retry: 100 * ms},
			{at: 10 * s, cost: 1, ok: true, rem: 4, eff: 10 * s}, // the next window
		},
	}, {
		name: "sliding_window: the next unit as prev's weight falls",
		cfg:  Config{Algorithm: SlidingWindow, Limits: []Limit{{5, 10 * s}}},
		steps: []estep{
			// taking the 4 left now, the next fits 2s into the next window
			{at: 3 * s, cost: 1, ok: true, rem: 4, eff: 9 * s},
			{at: 3 * s, cost: 4, ok: true, rem: 0, eff: 9 * s},
			{at: 5 * s, cost: 1, rem: 0, eff: 7 * s, retry: 7 * s},
			// window boundary: prev 5 weighs 5×0.8 = 4 at 12s
			{at: 12 * s, cost: 1, ok: true, rem: 0, eff: 2 * s},
			{at: 13 * s, cost: 1, rem: 0, eff: 1 * s, retry: 1 * s},
			{at: 14 * s, cost: 1, ok: true, rem: 0, eff: 2 * s},
		},
	}, {
		name: "sliding_log: the oldest live event's expiry",
		cfg:  Config{Algorithm: SlidingLog, Limits: []Limit{{3, 10 * s}}},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 2, eff: 10 * s},
			{at: 4 * s, cost: 1, ok: true, rem: 1, eff: 6 * s},
			{at: 4 * s, cost: 1, ok: true, rem: 0, eff: 6 * s},
			{at: 5 * s, cost: 1, rem: 0, eff: 5 * s, retry: 5 * s},
			{at: 5 * s, cost: 2, rem: 0, eff: 5 * s, retry: 9 * s},
			// window boundary: the event at 0 is gone, the two at 4s free at 14s
			{at: 10 * s, cost: 1, ok: true, rem: 0, eff: 4 * s},
		},
	}, {
		name: "token_bucket: the next token",
		cfg:  Config{Algorithm: TokenBucket, Limits: []Limit{{5, 10 * s}}},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 4, eff: 2 * s},
			{at: 0, cost: 4, ok: true, rem: 0, eff: 2 * s},
			{at: 1 * s, cost: 1, rem: 0, eff: 1 * s, retry: 1 * s},
			{at: 3 * s, cost: 1, ok: true, rem: 0, eff: 1 * s},
			// a full bucket: take its 5, the next comes one unit later
			{at: 60 * s, cost: 0, ok: true, rem: 5, eff: 2 * s},
		},
	}, {
		name: "token_bucket burst 2: the next token of the smaller bucket",
		cfg:  Config{Algorithm: TokenBucket, Limits: []Limit{{5, 10 * s}}, Burst: 2},
		steps: []estep{
			{at: 0, cost: 2, ok: true, rem: 0, eff: 2 * s},
			{at: 500 * ms, cost: 1, rem: 0, eff: 1500 * ms, retry: 1500 * ms},
		},
	}, {
		name: "token_bucket at scale 0.5 (a country, a tier, a share): 5/10s",
		cfg:  Config{Algorithm: TokenBucket, Limits: []Limit{{10, 10 * s}}},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 4, eff: 2 * s, scale: 0.5},
			{at: 0, cost: 4, ok: true, rem: 0, eff: 2 * s, scale: 0.5},
			{at: 0, cost: 1, rem: 0, eff: 2 * s, retry: 2 * s, scale: 0.5},
		},
	}, {
		name: "leaky_bucket depth 2: the queue's next place",
		cfg:  Config{Algorithm: LeakyBucket, Limits: []Limit{{5, 10 * s}}, Burst: 2, MaxDelay: 10 * s},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 2, eff: 2 * s},
			{at: 0, cost: 1, ok: true, rem: 1, eff: 2 * s},
			{at: 0, cost: 1, ok: true, rem: 0, eff: 2 * s},
			{at: 1 * s, cost: 1, rem: 0, eff: 1 * s, retry: 1 * s},
		},
	}, {
		name: "sliding_window burst 2: the burst bucket binds",
		cfg:  Config{Algorithm: SlidingWindow, Limits: []Limit{{5, 10 * s}}, Burst: 2},
		steps: []estep{
			{at: 0, cost: 1, ok: true, rem: 1, eff: 2 * s},
			{at: 0, cost: 1, ok: true, rem: 0, eff: 2 * s},
			{at: 1 * s, cost: 1, rem: 0, eff: 1 * s, retry: 1 * s},
		},
	}, {
		name: "sliding_window burst 3 of 3: a tie, the later of the two",
		cfg:  Config{Algorithm: SlidingWindow, Limits: []Limit{{3, 10 * s}}, Burst: 3},
		steps: []estep{
			// window: 10s − ⌊2×10s/3⌋ into the next; bucket: 10s/3
			{at: 0, cost: 3, ok: true, rem: 0, eff: 13333333334},
			{at: 1 * s, cost: 1, rem: 0, eff: 12333333334, retry: 12333333334},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			runEffective(t, mustNew(t, tc.cfg), tc.steps)
		})
	}
}

// TestEffectiveWindowShare pins t under a cluster share: the key's share
// of the limit is the scale every window and bucket is read at.
func TestEffectiveWindowShare(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, 10 * time.Second}}, Shares: true})
	l.SetShareAt("k", 0.3, base)
	runEffective(t, l, []estep{
		{at: 2 * time.Second, cost: 3, ok: true, rem: 0, eff: 8 * time.Second},
		{at: 2 * time.Second, cost: 1, rem: 0, eff: 8 * time.Second, retry: 8 * time.Second},
	})
	l = mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{10, 10 * time.Second}}, Shares: true})
	l.SetShareAt("k", 0.5, base)
	runEffective(t, l, []estep{
		{at: 0, cost: 5, ok: true, rem: 0, eff: 2 * time.Second},
		{at: time.Second, cost: 1, rem: 0, eff: time.Second, retry: time.Second},
	})
}
