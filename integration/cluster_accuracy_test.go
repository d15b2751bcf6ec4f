package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// accuracyPhase is one phase of TestClusterAccuracy: a fresh key, sent to
// the nodes at random by weight (nil: all alike; nodes past the split's
// end get none), split by then from shiftAt on.
type accuracyPhase struct {
	name    string
	seconds int
	split   []float64
	shiftAt int // seconds; 0: no shift
	then    []float64
}

var accuracyPhases = []accuracyPhase{
	{name: "all on node 1", seconds: 6, split: []float64{1}},
	{name: "even", seconds: 6},
	{name: "70/20/10", seconds: 6, split: []float64{70, 20, 10}},
	{name: "70/20/10 then 10/20/70", seconds: 8, split: []float64{70, 20, 10}, shiftAt: 4, then: []float64{10, 20, 70}},
}

// Issue 23's targets, as admitted/L: from the 3rd second of a phase (and
// of a split, after a shift) every second within ±10% and the median
// within ±5%; the key's first two seconds at most 1.1.
const (
	accuracyLo, accuracyHi       = 0.9, 1.1
	accuracyMedLo, accuracyMedHi = 0.95, 1.05
	accuracyFirst                = 1.1
)

// TestClusterAccuracy (issue 23): nodes of the cluster example (L = 200
// a second, token_bucket with burst 20 on /api, sliding_window on
// /search) share one key a phase; a client sends 2×L, evenly paced, each
// request to a node drawn at random (seeded) by weight, a fresh key per
// phase, and every phase must meet issue 23's targets for both
// algorithms, at the first run. Three nodes at 2×L by default (about 55 s);
// EDGELIMIT_ACCURACY_NODES and EDGELIMIT_ACCURACY_OFFERED (a multiple of
// L) run others, as BENCHMARKS.md's 5-node and 5×L figures do.
func TestClusterAccuracy(t *testing.T) {
	n := envInt(t, "EDGELIMIT_ACCURACY_NODES", 3)
	offered := envInt(t, "EDGELIMIT_ACCURACY_OFFERED", 2) * clusterLimit
	nodes := startCluster(t, n)
	rng := rand.New(rand.NewPCG(23, 1))
	var mu sync.Mutex
	for _, path := range []string{"/api/x", "/search/x"} {
		for i, ph := range accuracyPhases {
			key := fmt.Sprintf("accuracy-%s-%d", path[1:4], i)
			if missed := accuracyPhaseRun(t, nodes, rng, &mu, n, offered, path, key, ph); missed != "" {
				t.Errorf("%s %s: %s", path, ph.name, missed)
			}
		}
	}
}

// accuracyPhaseRun runs phase ph on key and says how it missed issue 23's
// targets ("" if it met them).
func accuracyPhaseRun(t *testing.T, nodes []*caddyProc, rng *rand.Rand, mu *sync.Mutex, n, offered int, path, key string, ph accuracyPhase) string {
	t.Helper()
	admitted, sent := accuracyLoad(t, path, key, ph.seconds, offered, func(since time.Duration) *caddyProc {
		w := ph.split
		if ph.shiftAt > 0 && since >= time.Duration(ph.shiftAt)*time.Second {
			w = ph.then
		}
		mu.Lock()
		defer mu.Unlock()
		return nodes[pickWeighted(rng, w, n)]
	})
	r := ratios(admitted)
	var steady []float64
	for s, x := range r {
		if s >= 2 && (ph.shiftAt == 0 || s < ph.shiftAt || s >= ph.shiftAt+2) {
			steady = append(steady, x)
		}
	}
	slices.Sort(steady)
	lo, hi, med := steady[0], steady[len(steady)-1], steady[len(steady)/2]
	t.Logf("%d nodes %d/s %s %s: admitted/L per second %.2f; from 2s %.2f–%.2f, median %.2f (sent/L %.2f)", n, offered, path, ph.name, r, lo, hi, med, ratios(sent))
	if lo < accuracyLo || hi > accuracyHi || med < accuracyMedLo || med > accuracyMedHi || max(r[0], r[1]) > accuracyFirst {
		return fmt.Sprintf("admitted/L %.2f; want from 2s %.2f–%.2f, median %.2f–%.2f, first seconds ≤ %.2f",
			r, accuracyLo, accuracyHi, accuracyMedLo, accuracyMedHi, accuracyFirst)
	}
	return ""
}

// pickWeighted draws a node of n by weight w (nil: all alike; nodes past
// w's end get none).
func pickWeighted(rng *rand.Rand, w []float64, n int) int {
	if w == nil {
		return rng.IntN(n)
	}
	sum := 0.0
	for _, p := range w {
		sum += p
	}
	x := rng.Float64() * sum
	for j, p := range w {
		if x -= p; x < 0 {
			return j
		}
	}
	return len(w) - 1
}

// accuracyLoad sends rate requests a second of key on path for seconds,
// evenly paced, each to the node pick names, and returns the requests
// admitted in each second they were sent in, and those sent (fewer than
// rate when the nodes or the machine fall behind).
func accuracyLoad(t *testing.T, path, key string, seconds, rate int, pick func(since time.Duration) *caddyProc) (admitted, sent []int) {
	t.Helper()
	sent = make([]int, seconds)
	start := time.Now()
	work, done := fleetSenders(max(24, rate/16), rate, start, path, key, seconds, false, pick)
	gap := time.Second / time.Duration(rate)
	tick := time.NewTicker(5 * time.Millisecond)
	due := 0
	for now := range tick.C {
		since := now.Sub(start)
		if since >= time.Duration(seconds)*time.Second {
			break
		}
		for ; time.Duration(due)*gap <= since; due++ {
			at := time.Duration(due) * gap
			select {
			case work <- at:
				sent[int(at/time.Second)]++
			default: // the nodes fall behind: offered less
			}
		}
	}
	tick.Stop()
	close(work)
	return done(t), sent
}
