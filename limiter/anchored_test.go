package limiter

import (
	"slices"
	"testing"
	"time"
)

// TestSlidingWindowAnchored: under Config.Shares a sliding window's
// windows start at the key's first unit (keyWindow), not at the epoch's
// multiples, and prev's weighed part is rounded down (slidingShared): 5
// per 10s, a key starting 3s into an epoch window has the window [3s,
// 13s), then [13s, 23s) where its 5 weigh ⌊5×(1−e/10s)⌋.
func TestSlidingWindowAnchored(t *testing.T) {
	cfg := Config{Algorithm: SlidingWindow, Limits: []Limit{{5, 10 * s1}}, Shares: true}
	for _, tc := range []struct {
		name  string
		steps []tstep
	}{{
		name: "the key's first window, then the next",
		steps: []tstep{
			{at: 3 * s1, cost: 5, ok: true, rem: 0, reset: 20 * s1},
			// still the first window: one fits 1 ns into the next, where
			// ⌊5×(1−1ns/10s)⌋ = 4
			{at: 12 * s1, cost: 1, rem: 0, reset: 11 * s1, retry: s1 + ns},
			{at: 13 * s1, cost: 1, rem: 0, reset: 10 * s1, retry: ns},
			{at: 13*s1 + ns, cost: 1, ok: true, rem: 0, reset: 20*s1 - ns},
			// the next once ⌊5×(1−e/10s)⌋ ≤ 3: e > 2s
			{at: 13*s1 + ns, cost: 1, rem: 0, reset: 20*s1 - ns, retry: 2 * s1},
			{at: 15 * s1, cost: 1, rem: 0, reset: 18 * s1, retry: ns},
			{at: 15*s1 + ns, cost: 1, ok: true, rem: 0, reset: 18*s1 - ns},
		},
	}, {
		name: "a window with no units: the key starts anew",
		steps: []tstep{
			{at: 3 * s1, cost: 1, ok: true, rem: 4, reset: 20 * s1},
			// [13s, 23s) had none: at 24s the key's windows start there
			{at: 24 * s1, cost: 5, ok: true, rem: 0, reset: 20 * s1},
			{at: 33 * s1, cost: 1, rem: 0, reset: 11 * s1, retry: s1 + ns},
			// [34s, 44s): ⌊5×0.8⌋ + 1 = 5
			{at: 36 * s1, cost: 1, ok: true, rem: 0, reset: 18 * s1},
		},
	}, {
		name: "the next window, late in it: curr became prev",
		steps: []tstep{
			{at: 3 * s1, cost: 4, ok: true, rem: 1, reset: 20 * s1},
			// ⌊4×(1s/10s)⌋ + 1 = 1 of 5
			{at: 22 * s1, cost: 1, ok: true, rem: 4, reset: 11 * s1},
		},
	}, {
		name: "a refund in the key's window",
		steps: []tstep{
			{at: 3 * s1, cost: 5, ok: true, rem: 0, reset: 20 * s1},
			{at: 3 * s1, cost: 2, op: refund},
			{at: 4 * s1, cost: 2, ok: true, rem: 0, reset: 19 * s1},
			{at: 4 * s1, cost: 1, rem: 0, reset: 19 * s1, retry: 9*s1 + ns},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { run(t, mustNew(t, cfg), tc.steps) })
	}
}

// TestSlidingWindowAnchoredFirstSecond: one client at 2×N, evenly paced,
// on a key that starts 370 ms into an epoch window. Epoch-aligned (no
// shares), the first second from the key's start admits 1.36×N: the
// window it started in admits N in its last 630 ms, and the next weighs
// those N as if spread over the whole window; then N−1 a second. Shared
// (Config.Shares: anchored, prev's part rounded down), every second from
// the key's start admits N.
func TestSlidingWindowAnchoredFirstSecond(t *testing.T) {
	for _, tc := range []struct {
		shares bool
		want   []int
	}{
		{false, []int{136, 100, 99, 99}},
		{true, []int{100, 100, 100, 100}},
	} {
		l := mustNew(t, Config{Algorithm: SlidingWindow, Limits: []Limit{{100, s1}}, Shares: tc.shares})
		start := base.Add(370 * ms)
		got := make([]int, len(tc.want))
		for i := range 200 * len(got) {
			if l.AllowAt("k", start.Add(time.Duration(i)*5*ms), 1).Allowed {
				got[i/200]++
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("shares %v: admitted per second from the key's start %v, want %v", tc.shares, got, tc.want)
		}
	}
}
