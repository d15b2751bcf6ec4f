package limiter

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// request is one request of a synthetic trace.
type request struct {
	at  int64 // ns after base
	src int32
}

// burstyTrace is a deterministic trace of about total requests from
// sources that alternate between bursts (on for 5–60s, Poisson at a rate
// drawn from [lo, hi) requests a second) and silences (10–120s).
func burstyTrace(sources, total int, lo, hi float64) []request {
	rng := rand.New(rand.NewPCG(1, 2))
	perSource := total / sources
	trace := make([]request, 0, total+sources)
	for src := range sources {
		t, n := int64(rng.IntN(60))*int64(s1), 0
		for n < perSource {
			on := t + int64(5+rng.IntN(56))*int64(s1)
			rate := lo + (hi-lo)*rng.Float64() // per second
			for n < perSource {
				t += int64(rng.ExpFloat64() / rate * float64(s1))
				if t >= on {
					break
				}
				trace = append(trace, request{t, int32(src)})
				n++
			}
			t = on + int64(10+rng.IntN(111))*int64(s1)
		}
	}
	slices.SortFunc(trace, func(a, b request) int { return int(a.at - b.at) })
	return trace
}

// The sliding window counter approximates the sliding log: replay the same
// bursty traces through both and count the requests they decide
// differently, and how far the counter goes over the limit in any sliding
// window. The bounds are the measured figures (see BENCHMARKS.md) with a
// margin.
func TestSlidingWindowAccuracy(t *testing.T) {
	total := 500_000
	if raceEnabled || testing.Short() {
		total = 50_000
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "src" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		name   string
		lo, hi float64 // request rate of a burst, per second
		lim    Limit
		bound  float64 // the share of requests decided differently must stay below
	}{
		{"overloaded", 0.5, 8, Limit{100, time.Minute}, 0.15},
		{"overloaded", 0.5, 8, Limit{10, s1}, 0.05},
		{"near the limit", 0.2, 2.5, Limit{100, time.Minute}, 0.03},
		{"near the limit", 0.2, 2.5, Limit{10, s1}, 0.001},
	} {
		trace := burstyTrace(len(keys), total, c.lo, c.hi)
		sw := mustNew(t, Config{Algorithm: SlidingWindow, Limits: []Limit{c.lim}})
		sl := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{c.lim}})
		var differ, onlySW, onlySL, allowedSW, allowedSL int
		admitted := make([][]int64, len(keys)) // the counter's admissions in the last window, per key
		peak := 0                              // the most it admitted in any window
		for _, r := range trace {
			now := base.Add(time.Duration(r.at))
			a := sw.AllowAt(keys[r.src], now, 1).Allowed
			b := sl.AllowAt(keys[r.src], now, 1).Allowed
			if a {
				allowedSW++
				q := append(admitted[r.src], r.at)
				for q[0] <= r.at-int64(c.lim.Window) {
					q = q[1:]
				}
				admitted[r.src] = q
				peak = max(peak, len(q))
			}
			if b {
				allowedSL++
			}
			if a != b {
				differ++
				if a {
					onlySW++
				} else {
					onlySL++
				}
			}
		}
		share := float64(differ) / float64(len(trace))
		t.Logf("%s, %v: %d requests over %v: sliding_log allowed %d, sliding_window %d (%+.2f%%); decided differently %d (%.2f%%): %d by the window only, %d by the log only; the window admitted at most %d in a sliding window (%.2f×N)",
			c.name, c.lim, len(trace), time.Duration(trace[len(trace)-1].at).Round(time.Second), allowedSL, allowedSW,
			100*float64(allowedSW-allowedSL)/float64(allowedSL), differ, 100*share, onlySW, onlySL, peak, float64(peak)/float64(c.lim.Count))
		if share >= c.bound {
			t.Errorf("%s, %v: %.2f%% of requests decided differently, want < %.1f%%", c.name, c.lim, 100*share, 100*c.bound)
		}
		if peak > 2*int(c.lim.Count) {
			t.Errorf("%s, %v: the counter admitted %d in one window, more than 2N", c.name, c.lim, peak)
		}
	}
}
