package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// The fleet scenarios are the integration tests' setup (TestClusterAccuracy):
// L = 100 per second shared by 3 or 5 nodes gossiping every 100 ms, one
// client sending evenly paced requests, each to a node drawn at random by
// weight, the nodes' timers at random phases, a fresh key per phase that
// starts anywhere in the limiters' windows.

// splits are the traffic splits of the fleet scenarios, by name.
var splits = []struct {
	name string
	w    []float64
}{
	{"one", []float64{1}},
	{"even", nil},
	{"70/20/10", []float64{70, 20, 10}},
	{"shift", []float64{70, 20, 10}}, // then 10/20/70 from shiftAt
}

// shiftAt is when the shift scenarios move from 70/20/10 to 10/20/70.
const shiftAt = 4 * time.Second

func fleetScenarios(nodes int, algo limiter.Algorithm, offered float64, seed uint64) []Scenario {
	var out []Scenario
	for _, sp := range splits {
		s := Scenario{
			Name:  fmt.Sprintf("%s %d nodes %.0fxL %s", algo, nodes, offered, sp.name),
			Nodes: nodes, Seconds: 8, Limit: 100, Offered: offered, Algorithm: algo,
			Weights: sp.w, Paced: true, RandomTicks: true, Seed: seed,
			Start: time.Duration(seed*370) * time.Millisecond % time.Second,
		}
		if sp.w == nil {
			s.Dist = Even
		}
		if sp.name == "shift" {
			s.ShiftAt, s.ShiftTo = shiftAt, []float64{10, 20, 70}
		}
		out = append(out, s)
	}
	return out
}

// steady is admitted/L from the 3rd second of the phase (and of the
// split, after a shift): every second and their median.
func steady(r Result) (lo, hi, median float64) {
	var xs []float64
	for i, x := range r.PerSecond {
		s := time.Duration(i) * time.Second
		if i < 2 || r.Scenario.ShiftAt > 0 && s >= r.Scenario.ShiftAt && s < r.Scenario.ShiftAt+2*time.Second {
			continue
		}
		xs = append(xs, x)
	}
	slices.Sort(xs)
	return xs[0], xs[len(xs)-1], xs[len(xs)/2]
}

func fmtSeconds(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", x)
	}
	return b.String()
}

func TestPrintFleet(t *testing.T) {
	for _, nodes := range []int{3, 5} {
		for _, algo := range []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow} {
			for _, offered := range []float64{2, 5} {
				for _, s := range fleetScenarios(nodes, algo, offered, 1) {
					r := Run(s)
					lo, hi, med := steady(r)
					t.Logf("%-40s %s | from 2s %.2f–%.2f median %.2f", s.Name, fmtSeconds(r.PerSecond), lo, hi, med)
				}
			}
		}
	}
}

// TestFleet: the targets of issue 23 on the fleet scenarios, seeds 1–5,
// both algorithms, 3 and 5 nodes, 2×L and 5×L: from the 3rd second (and
// the 3rd after a shift) every second within ±10% of L and the median
// within ±5%; the first two seconds of the key at most 1.1×L. Worst over
// the 160 runs: token_bucket 0.91 in a second, medians ≥ 0.96, first
// seconds ≤ 1.08; sliding_window 0.90, ≥ 0.96, ≤ 1.07 (5 nodes at 2×L
// the lowest: 4 requests a node an interval).
func TestFleet(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		for _, nodes := range []int{3, 5} {
			for _, algo := range []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow} {
				for _, offered := range []float64{2, 5} {
					for _, s := range fleetScenarios(nodes, algo, offered, seed) {
						r := Run(s)
						lo, hi, med := steady(r)
						if lo < 0.9 || hi > 1.1 || med < 0.95 || med > 1.05 || max(r.PerSecond[0], r.PerSecond[1]) > 1.1 {
							t.Errorf("seed %d %s: %s; from 2s %.2f–%.2f, median %.2f", seed, s.Name, fmtSeconds(r.PerSecond), lo, hi, med)
						}
					}
				}
			}
		}
	}
}

// TestFleetLoneSlidingWindow: one node alone, at 2×L, a key starting 370
// ms into an epoch window. With the epoch's windows its first second
// (from the key's start) admitted 1.36×L (the next window weighed the
// first one's N as if spread over all of it); a shared sliding window's
// windows are the key's own (limiter.Config.Shares), and every second
// admits at most L.
func TestFleetLoneSlidingWindow(t *testing.T) {
	r := Run(Scenario{Nodes: 1, Seconds: 3, Limit: 100, Offered: 2, Algorithm: limiter.SlidingWindow, Paced: true, Start: 370 * time.Millisecond})
	t.Logf("one node alone: %s", fmtSeconds(r.PerSecond))
	for i, x := range r.PerSecond {
		if x > 1 || x < 0.98 {
			t.Errorf("second %d: %.2f×L, want 0.98–1", i, x)
		}
	}
}
