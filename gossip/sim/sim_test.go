package sim

import (
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

func scenarios(nodes int) []Scenario {
	sec := time.Second
	ss := []Scenario{
		{Name: "even 1.5xL", Nodes: nodes, Dist: Even},
		{Name: "even 5xL", Nodes: nodes, Dist: Even, Offered: 5},
		{Name: "zipf 1.5xL", Nodes: nodes, Dist: Zipf},
		{Name: "zipf 5xL", Nodes: nodes, Dist: Zipf, Offered: 5},
		{Name: "one node 1.5xL", Nodes: nodes, Dist: One},
		{Name: "one node 5xL", Nodes: nodes, Dist: One, Offered: 5},
		{Name: "move 0->1 at 3s", Nodes: nodes, Dist: One, Offered: 2, MoveAt: 3 * sec},
		{Name: "kill node 0 at 3s", Nodes: nodes, Dist: Even, Offered: 2, KillAt: 3 * sec},
		{Name: "partition 4|6 at 3s", Nodes: nodes, Dist: Even, Offered: 2, PartitionAt: 3 * sec},
		{Name: "partition 4|6 at 3s fail_closed", Nodes: nodes, Dist: Even, Offered: 2, PartitionAt: 3 * sec, OnPartition: gossip.FailClosed},
		{Name: "partition 4|6 at 3s fail_open", Nodes: nodes, Dist: Even, Offered: 2, PartitionAt: 3 * sec, OnPartition: gossip.FailOpen},
		{Name: "zipf 2xL 10% loss", Nodes: nodes, Dist: Zipf, Offered: 2, Loss: 0.1},
		{Name: "partition 4|6 at 3s, healed at 6s", Nodes: nodes, Dist: Even, Offered: 2, PartitionAt: 3 * sec, HealAt: 6 * sec},
	}
	for i := range ss {
		if raceEnabled && ss[i].HealAt == 0 { // a heal at 6s needs 10s
			ss[i].Seconds = 6
		}
		if nodes >= 100 {
			// L=1000 over 100 nodes is 10 units per second per node: the
			// limiter's whole-unit limits and bursts would dominate.
			ss[i].Limit = 10_000
		}
	}
	return ss
}

func keysScenario() Scenario {
	return Scenario{Name: "1000 keys zipf, 20xL", Dist: Even, Keys: 1000, Offered: 20, Seconds: 5}
}

// check asserts the targets on r and logs what it measured.
func check(t *testing.T, r Result) {
	t.Helper()
	s := r.Scenario
	lo, hi := 9.0, 0.0
	from := 1 // the first second is the cold start
	switch {
	case s.MoveAt > 0:
		from = int(s.MoveAt/time.Second) + 1 // back in 1s
	case s.KillAt > 0:
		from = int(s.KillAt/time.Second) + 2 // back in 2s
	case s.HealAt > 0:
		from = int(s.HealAt/time.Second) + 2 // back in 2s
	case s.PartitionAt > 0:
		from = int(s.PartitionAt/time.Second) + 1
	}
	for _, x := range r.PerSecond[from:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	t.Logf("%s: admitted/L from %ds: min %.3f max %.3f; max 1s window %.3f", s.Name, from, lo, hi, r.MaxWindow)
	if s.PartitionAt > 0 && s.OnPartition == gossip.FailOpen {
		return // the minority lifts the limit: nothing to bound
	}
	if s.PartitionAt > 0 && s.OnPartition == gossip.FailClosed {
		// Target ≤ L: the minority denies, the majority takes the limit.
		// The 1 s window across the partition's start admits 1.027×L
		// since a token bucket's rate under a share is no longer rounded
		// down to whole units (1.019 before, which lost up to half a unit
		// a node a second everywhere else).
		if hi > 1.02 || r.MaxWindow > 1.03 || lo < 0.93 {
			t.Errorf("%s: admitted/L in [%.3f, %.3f], max window %.3f", s.Name, lo, hi, r.MaxWindow)
		}
		return
	}
	if s.PartitionAt > 0 && s.HealAt == 0 {
		// Target ≤ 1.1×L: the majority reclaims the minority's shares (it
		// cannot tell it from dead nodes); the minority (local_share) keeps
		// seen/N of its shares, at most 2×seen/N×10% of L in all.
		if hi > 1.1 || r.MaxWindow > 1.1 {
			t.Errorf("%s: %.3f×L, max window %.3f", s.Name, hi, r.MaxWindow)
		}
		return
	}
	// The target is ±5% in every second; measured lows are 0.935–0.95 at
	// 1.5×L (Poisson noise at ~15 requests per node per interval), so the
	// assertion is 0.93 and the mean must reach 0.95.
	if lo < 0.93 || hi > 1.05 || r.MaxWindow > 1.1 {
		t.Errorf("%s: admitted/L in [%.3f, %.3f], max window %.3f", s.Name, lo, hi, r.MaxWindow)
	}
	mean := 0.0
	for _, x := range r.PerSecond[from:] {
		mean += x
	}
	if mean /= float64(len(r.PerSecond[from:])); mean < 0.95 {
		t.Errorf("%s: mean admitted/L %.3f", s.Name, mean)
	}
}

func TestScenarios(t *testing.T) {
	for _, s := range scenarios(10) {
		check(t, Run(s))
	}
	if testing.Short() || raceEnabled {
		return
	}
	for _, s := range big() {
		check(t, Run(s))
	}
}

// slidingScenarios are the 10-node scenarios with the default algorithm,
// sliding_window, whose nodes report their use of the window in force.
func slidingScenarios() []Scenario {
	ss := scenarios(10)
	for i := range ss {
		ss[i].Algorithm = limiter.SlidingWindow
		ss[i].Name += " sliding_window"
	}
	return ss
}

// TestScenariosSlidingWindow: with sliding_window, no 1 s window above
// 1.1×L (1.12 across a partition's start, 1.15 across its heal; none
// under fail_open), and at least 0.9×L every second in steady
// state. A sliding window's estimate of the last window assumes its
// requests came evenly: a node whose share rose mid-window under-counts
// and admits a little more at the next window's start; and a share that
// falls then rises cannot use what it gave back until the window slides.
func TestScenariosSlidingWindow(t *testing.T) {
	for _, s := range slidingScenarios() {
		r := Run(s)
		from, most := 1, 1.1
		if s.PartitionAt > 0 {
			// the 1 s window across the partition's start admits up to
			// 1.11×L (1.09 before issue 23's changes: a shared window's
			// prev rounded down lets each of the 10 nodes one unit more
			// a window, and the smoother demand keeps the minority's
			// shares a little higher while their reports expire)
			most = 1.12
		}
		if s.KillAt > 0 {
			from = int(s.KillAt/time.Second) + 2
		}
		if s.HealAt > 0 {
			// the window in which the partition heals admits 1.12×L, with
			// or without the cap on the others' window use: the shares
			// move back within a few intervals, faster than the windows
			// the majority filled slide out (not solved; token buckets
			// admit at most 1.06×L there)
			from, most = int(s.HealAt/time.Second)+2, 1.15
		}
		lo := 9.0
		for _, x := range r.PerSecond[from:] {
			lo = min(lo, x)
		}
		t.Logf("%s: admitted/L from %ds ≥ %.3f; max 1s window %.3f", s.Name, from, lo, r.MaxWindow)
		if s.OnPartition == gossip.FailOpen {
			continue
		}
		if r.MaxWindow > most || lo < 0.9 {
			t.Errorf("%s: admitted/L ≥ %.3f, max 1s window %.3f", s.Name, lo, r.MaxWindow)
		}
	}
}

// big is the 100-node runs: the ones that do not depend on Poisson noise at
// a few requests per node per interval, 5s each (a 100-node run costs ~3s).
func big() []Scenario {
	var out []Scenario
	for _, s := range scenarios(100) {
		switch s.Name {
		case "even 5xL", "one node 5xL", "move 0->1 at 3s", "kill node 0 at 3s":
			s.Seconds = 5
			out = append(out, s)
		}
	}
	return out
}

func TestScenarioKeys(t *testing.T) {
	s := keysScenario()
	if raceEnabled {
		s.Seconds = 2
	}
	r := Run(s)
	t.Logf("%d keys: %.1f entries/report, %.0f B/node/s", s.Keys, r.EntriesPerReport, r.BytesPerNodeSecond)
	if r.EntriesPerReport > float64(s.Keys)/10 {
		t.Errorf("%.1f entries per report for %d keys", r.EntriesPerReport, s.Keys)
	}
	perReport := 32 + 28*r.EntriesPerReport
	if want := perReport * float64(r.Scenario.Nodes-1) * 10; r.BytesPerNodeSecond > want*1.01 {
		t.Errorf("%.0f B/node/s, want about %.0f", r.BytesPerNodeSecond, want)
	}
}

func TestDeterministic(t *testing.T) {
	s := Scenario{Name: "d", Dist: Zipf, Seconds: 2, Loss: 0.05}
	a, b := Run(s), Run(s)
	for i := range a.PerSecond {
		if a.PerSecond[i] != b.PerSecond[i] {
			t.Fatalf("second %d: %v then %v", i, a.PerSecond[i], b.PerSecond[i])
		}
	}
}

func TestPrintScenarios(t *testing.T) {
	for _, s := range scenarios(10) {
		t.Log("\n" + Run(s).Table())
	}
	for _, s := range slidingScenarios() {
		t.Log("\n" + Run(s).Table())
	}
	t.Log("\n" + Run(keysScenario()).Table())
	if !testing.Short() && !raceEnabled {
		for _, s := range big() {
			t.Log("\n" + Run(s).Table())
		}
	}
}

// TestGossipBytes measures what gossip costs per node at 10 nodes as the
// active keys grow (Zipf over keys, 20×L offered in all): reports carry
// the hot keys only.
func TestGossipBytes(t *testing.T) {
	keys := []int{10, 1000, 100_000}
	if testing.Short() || raceEnabled {
		keys = keys[:2]
	}
	for _, k := range keys {
		s := Scenario{Name: "keys", Dist: Even, Keys: k, Offered: 20, Seconds: 5}
		if raceEnabled {
			s.Seconds = 2
		}
		r := Run(s)
		t.Logf("%6d keys: %5.1f entries/report, %6.0f B/node/s", k, r.EntriesPerReport, r.BytesPerNodeSecond)
		// 20×L in all makes at most a few dozen keys hot (near their
		// share), however many are active
		if r.EntriesPerReport > 2*s.Offered {
			t.Errorf("%d keys: %.1f entries per report", k, r.EntriesPerReport)
		}
	}
}
