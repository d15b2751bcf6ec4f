package limiter

import (
	"testing"
	"time"
)

func TestFixedWindow(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{3, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: s1},
		{at: 0, cost: 1, ok: true, rem: 1, reset: s1},
		{at: 500 * ms, cost: 1, ok: true, rem: 0, reset: 500 * ms},
		{at: 999 * ms, cost: 1, ok: false, rem: 0, reset: ms, retry: ms},
		{at: s1 - ns, cost: 1, ok: false, rem: 0, reset: ns, retry: ns},
		// the window edge: a whole new window
		{at: s1, cost: 1, ok: true, rem: 2, reset: s1},
		{at: s1, cost: 2, ok: true, rem: 0, reset: s1},
		{at: 1500 * ms, cost: 1, ok: false, rem: 0, reset: 500 * ms, retry: 500 * ms},
		// more than the limit can never pass: RetryAfter is the window
		{at: 1500 * ms, cost: 4, ok: false, rem: 0, reset: 500 * ms, retry: s1},
		// cost 0 and negative: allowed, take nothing
		{at: 1500 * ms, cost: 0, ok: true, rem: 0, reset: 500 * ms},
		{at: 1500 * ms, cost: -5, ok: true, rem: 0, reset: 500 * ms},
		// time going backwards stays in the later window
		{at: 200 * ms, cost: 1, ok: false, rem: 0, reset: 1800 * ms, retry: 1800 * ms},
		{at: 2 * s1, cost: 3, ok: true, rem: 0, reset: s1},
		{at: 2*s1 + 999*ms, cost: 1, ok: false, rem: 0, reset: ms, retry: ms},
		// a window skipped entirely
		{at: 10 * s1, cost: 1, ok: true, rem: 2, reset: s1},
	})
}

// Windows are aligned to the Unix epoch, not to a key's first request: a key
// that starts late in a window gets only the rest of it, and 2N can pass
// around an edge.
func TestFixedWindowEpochAligned(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{3, time.Minute}}})
	run(t, l, []tstep{
		{at: 59 * s1, cost: 3, ok: true, rem: 0, reset: s1},
		{at: 60*s1 - ns, cost: 1, ok: false, rem: 0, reset: ns, retry: ns},
		{at: 60 * s1, cost: 3, ok: true, rem: 0, reset: time.Minute},
		{at: 61 * s1, cost: 1, ok: false, rem: 0, reset: 59 * s1, retry: 59 * s1},
	})
}

func TestFixedWindowBurst(t *testing.T) {
	// 10/1s with a token bucket of 3 in front: 3 back to back, then one per 100ms.
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, s1}}, Burst: 3})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: s1},
		{at: 0, cost: 1, ok: true, rem: 1, reset: s1},
		{at: 0, cost: 1, ok: true, rem: 0, reset: s1},
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: 100 * ms},
		{at: 100*ms - ns, cost: 1, ok: false, rem: 0, reset: 900*ms + ns, retry: ns},
		{at: 100 * ms, cost: 1, ok: true, rem: 0, reset: 900 * ms},
		{at: 300 * ms, cost: 2, ok: true, rem: 0, reset: 700 * ms},
		// more than the burst can never pass
		{at: 900 * ms, cost: 4, ok: false, rem: 3, reset: 100 * ms, retry: s1},
		{at: 900 * ms, cost: 2, ok: true, rem: 1, reset: 100 * ms},
		{at: 5 * s1, cost: 1, ok: true, rem: 2, reset: s1},
	})

	// 4/1s with a burst of 3: the window binds before the bucket does.
	l = mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{4, s1}}, Burst: 3})
	run(t, l, []tstep{
		{at: 0, cost: 3, ok: true, rem: 0, reset: s1},
		{at: 500 * ms, cost: 1, ok: true, rem: 0, reset: 500 * ms},
		{at: 600 * ms, cost: 1, ok: false, rem: 0, reset: 400 * ms, retry: 400 * ms},
		{at: s1, cost: 2, ok: true, rem: 1, reset: s1},
	})
}

func TestSlidingWindow(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingWindow, Limits: []Limit{{10, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 4, ok: true, rem: 6, reset: 2 * s1},
		{at: 500 * ms, cost: 6, ok: true, rem: 0, reset: 1500 * ms},
		// curr (10) must decay in the next window to 9: 100ms into it
		{at: 900 * ms, cost: 1, ok: false, rem: 0, reset: 1100 * ms, retry: 200 * ms},
		{at: s1, cost: 1, ok: false, rem: 0, reset: s1, retry: 100 * ms},
		{at: 1100*ms - ns, cost: 1, ok: false, rem: 0, reset: 900*ms + ns, retry: ns},
		// 10×0.9 + 1 = 10
		{at: 1100 * ms, cost: 1, ok: true, rem: 0, reset: 1900 * ms},
		// 10×0.5 + 1 = 6
		{at: 1500 * ms, cost: 4, ok: true, rem: 0, reset: 1500 * ms},
		// 10×(1−e) + 5 ≤ 9 once e ≥ 0.6
		{at: 1500 * ms, cost: 1, ok: false, rem: 0, reset: 1500 * ms, retry: 100 * ms},
		{at: 1600 * ms, cost: 1, ok: true, rem: 0, reset: 1400 * ms},
		// next window: prev = 6, 6×0.5 = 3 used
		{at: 2500 * ms, cost: 1, ok: true, rem: 6, reset: 1500 * ms},
		// huge cost, cost 0, negative cost
		{at: 2500 * ms, cost: 11, ok: false, rem: 6, reset: 1500 * ms, retry: s1},
		{at: 2500 * ms, cost: 0, ok: true, rem: 6, reset: 1500 * ms},
		{at: 2500 * ms, cost: -1, ok: true, rem: 6, reset: 1500 * ms},
		// time going backwards: judged with the later window at full weight
		{at: 1500 * ms, cost: 1, ok: true, rem: 2, reset: 2500 * ms},
		// 6×(1−e) + 2 ≤ 7 once e ≥ 1/6 of the later window
		{at: 1500 * ms, cost: 3, ok: false, rem: 2, reset: 2500 * ms, retry: 666666667 * ns},
		// two windows later, everything has aged out
		{at: 4 * s1, cost: 10, ok: true, rem: 0, reset: 2 * s1},
	})
}

func TestSlidingWindowBurst(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingWindow, Limits: []Limit{{10, s1}}, Burst: 2})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 1, reset: 2 * s1},
		{at: 0, cost: 1, ok: true, rem: 0, reset: 2 * s1},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 2 * s1, retry: 100 * ms},
		{at: 100 * ms, cost: 1, ok: true, rem: 0, reset: 1900 * ms},
		{at: 200 * ms, cost: 3, ok: false, rem: 1, reset: 1800 * ms, retry: s1},
	})
}

// RetryAfter of the sliding window is exact for its estimate: over many
// states, a request made RetryAfter later passes and one made 1ns earlier
// does not.
func TestSlidingWindowRetryExact(t *testing.T) {
	denials := 0
	for _, w := range []time.Duration{ms, 7 * ms, s1, time.Minute, 30 * 24 * time.Hour} {
		for _, n := range []int64{1, 3, 10, 1000} {
			for _, cost := range []int64{1, 2, n} {
				for _, off := range []time.Duration{0, w / 3, w / 2, w - 1} {
					cfg := Config{Algorithm: SlidingWindow, Limits: []Limit{{n, w}}}
					l := mustNew(t, cfg)
					// fill the previous window and part of this one
					start := time.Unix(0, alignDown(base.UnixNano(), int64(w)))
					l.AllowAt("k", start.Add(off), n)
					l.AllowAt("k", start.Add(w+off/2), (n+1)/2)
					now := start.Add(w + off)
					d := l.AllowAt("k", now, cost)
					if d.Allowed || cost > n { // cost > n never passes
						continue
					}
					denials++
					if d.RetryAfter > ns && l.PeekAt("k", now.Add(d.RetryAfter-ns), cost).Allowed {
						t.Errorf("w=%v n=%d cost=%d off=%v: allowed 1ns before RetryAfter %v", w, n, cost, off, d.RetryAfter)
					}
					if !l.PeekAt("k", now.Add(d.RetryAfter), cost).Allowed {
						t.Errorf("w=%v n=%d cost=%d off=%v: denied at RetryAfter %v", w, n, cost, off, d.RetryAfter)
					}
				}
			}
		}
	}
	if denials < 100 {
		t.Fatalf("only %d denials tested", denials)
	}
}

// TestRefundAfterRollover: a refund made with the decision's time gives
// the units back to the window that took them, not to a later one the key
// has moved on to.
func TestRefundAfterRollover(t *testing.T) {
	for _, algo := range []Algorithm{FixedWindow, SlidingWindow} {
		t.Run(string(algo), func(t *testing.T) {
			l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{2, time.Second}}})
			first := base.Add(900 * time.Millisecond)
			next := base.Add(time.Second + 100*time.Millisecond)
			l.AllowAt("k", first, 1)
			for range 2 {
				l.AllowAt("k", next, 1)
			}
			before := l.PeekAt("k", next, 0).Quotas[0].Remaining
			l.Refund("k", Taken{At: first, Cost: 1, Scale: 1}, first)
			after := l.PeekAt("k", next, 0).Quotas[0].Remaining
			if algo == FixedWindow && after != before {
				t.Fatalf("fixed window: remaining %d after the refund, want %d: the refunded unit belonged to the window before", after, before)
			}
			if algo == SlidingWindow && after < before {
				t.Fatalf("sliding window: remaining fell from %d to %d", before, after)
			}
			if d := l.PeekAt("k", next, 1); d.Allowed && algo == FixedWindow {
				t.Fatal("fixed window: the full window admits again after a refund of an older unit")
			}
		})
	}
}
