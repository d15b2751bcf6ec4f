package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// simulate sends one key's requests at times (sorted) through a limiter of
// c, n per w, in virtual time: each is decided at its time and done then,
// or if served, when a leaky bucket lets it go (its time plus its Delay).
func simulate(t *testing.T, c boundaryCase, n int64, w time.Duration, times []time.Time, served bool) []shot {
	t.Helper()
	lim, err := limiter.New(limiter.Config{
		Algorithm: limiter.Algorithm(c.Algorithm),
		Limits:    []limiter.Limit{{Count: n, Window: w}},
		Burst:     c.Burst,
	})
	if err != nil {
		t.Fatal(err)
	}
	var shots []shot
	for _, at := range times {
		d := lim.AllowAt("k", at, 1)
		done := at
		if served {
			done = at.Add(d.Delay)
		}
		shots = append(shots, shot{Sent: at, Done: done, OK: d.Allowed})
	}
	return shots
}

// boundaryLimits are the limits the bounds are checked at: the stage's,
// the outside finding's (60 a minute), and one whose unit, w/n, is not a
// whole number of nanoseconds.
var boundaryLimits = []limiter.Limit{{Count: boundaryLimit, Window: boundaryWindow}, {Count: 60, Window: time.Minute}, {Count: 7, Window: time.Second}}

// TestBoundaryBounds: the stage's attack, driven through package limiter
// in virtual time, admits exactly boundaryBound in one window's span, with
// the stage's lead before the edge and with a lead of 1 ns; random
// schedules, bursty around the edges (500 per case and limit), never admit
// more, and reach it.
func TestBoundaryBounds(t *testing.T) {
	for _, l := range boundaryLimits {
		n, w := l.Count, l.Window
		edge := time.Unix(0, 1_000_000*int64(w)) // an edge of the epoch-aligned windows
		for _, c := range boundaryCases() {
			for _, served := range []bool{false, true} {
				if served && c.Algorithm != string(limiter.LeakyBucket) {
					continue
				}
				bound, formula := boundaryBound(c, n, w, limiter.DefaultMaxDelay, served)
				for _, lead := range []time.Duration{boundaryLead, time.Nanosecond} {
					got := maxWithin(simulate(t, c, n, w, attackTimes(edge, n, w, lead), served), w)
					if got != bound {
						t.Errorf("%v, %s, served %v, lead %v: the attack admitted %d in one window, bound %d (%s)", l, c, served, lead, got, bound, formula)
					}
				}
				rng := rand.New(rand.NewPCG(uint64(n), uint64(len(c.String()))))
				reached := false
				for trial := range 500 {
					times := randomTimes(rng, edge, n, w)
					got := maxWithin(simulate(t, c, n, w, times, served), w)
					if got > bound {
						t.Fatalf("%v, %s, served %v, random schedule %d: admitted %d in one window, above the bound %d (%s)", l, c, served, trial, got, bound, formula)
					}
					reached = reached || got == bound
				}
				if !reached {
					t.Errorf("%v, %s, served %v: no random schedule reached the bound %d: too weak a search", l, c, served, bound)
				}
			}
		}
	}
}

// randomTimes is a random schedule over four windows from edge−w: bursts
// at random times, most of them within a few units of an edge, and
// scattered requests.
func randomTimes(rng *rand.Rand, edge time.Time, n int64, w time.Duration) []time.Time {
	unit := w / time.Duration(n)
	var times []time.Time
	for range 1 + rng.IntN(8) {
		at := edge.Add(time.Duration(rng.Int64N(int64(4*w))) - w)
		if rng.IntN(3) > 0 { // near an edge
			k := time.Duration(rng.IntN(4) - 1)
			at = edge.Add(k*w + time.Duration(rng.Int64N(int64(4*unit))) - 2*unit)
		}
		for range 1 + rng.Int64N(2*n) {
			times = append(times, at.Add(time.Duration(rng.Int64N(int64(unit/4)+1))))
		}
	}
	for range rng.Int64N(8 * n) {
		times = append(times, edge.Add(time.Duration(rng.Int64N(int64(4*w)))-w))
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times
}

// TestMaxWithin: a shot counts in a span only if it was sent and done
// within it, the span half-open.
func TestMaxWithin(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	shots := []shot{
		{Sent: at(0), Done: at(1), OK: true},
		{Sent: at(500), Done: at(999), OK: true},
		{Sent: at(600), Done: at(1000), OK: true}, // done at the end of [0, 1000): out of it
		{Sent: at(700), Done: at(701), OK: false},
		{Sent: at(1200), Done: at(1300), OK: true},
	}
	if got := maxWithin(shots, time.Second); got != 3 { // [500, 1500)
		t.Errorf("maxWithin = %d, want 3", got)
	}
	if got := maxSent(shots, time.Second); got != 3 { // sent in [0, 1000) or [500, 1500)
		t.Errorf("maxSent = %d, want 3", got)
	}
	if shots[2].Done != at(1000) {
		t.Error("maxSent changed its argument")
	}
}
