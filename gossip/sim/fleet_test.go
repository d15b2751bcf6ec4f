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

// TestFleetLoss: the simulator shows what three real nodes showed (issue
// 23): under uneven or even traffic the fleet loses 5–15% of L, and a
// sliding window's first second admits more than 1.2×L.
func TestFleetLoss(t *testing.T) {
	for _, algo := range []limiter.Algorithm{limiter.TokenBucket, limiter.SlidingWindow} {
		for _, s := range fleetScenarios(3, algo, 2, 1)[1:3] { // even, 70/20/10
			r := Run(s)
			_, _, med := steady(r)
			t.Logf("%s: %s, median from 2s %.2f", s.Name, fmtSeconds(r.PerSecond), med)
			if med < 0.85 || med > 0.95 {
				t.Errorf("%s: median %.2f, real processes 0.87–0.94", s.Name, med)
			}
			if algo == limiter.SlidingWindow && r.PerSecond[0] < 1.2 {
				t.Errorf("%s: first second %.2f, real processes 1.23–1.26", s.Name, r.PerSecond[0])
			}
		}
	}
}
