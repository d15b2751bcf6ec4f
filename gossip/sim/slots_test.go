package sim

import (
	"testing"
	"time"
)

// A concurrency rule of N=30 over 3 nodes, one of which gets 80% of the
// arrivals: the fleet never holds more than N requests at once, and uses
// most of N while it is asked for more; a killed node's share goes back
// to the others within the reports' TTL and a raise.
func TestSlotsSkewed(t *testing.T) {
	skew := []float64{0.8, 0.1, 0.1}
	for _, s := range []SlotScenario{
		{Name: "3 nodes N=30, 80/10/10, 1.5xN", Weights: skew},
		{Name: "3 nodes N=30, 80/10/10, 3xN", Weights: skew, Offered: 3},
		{Name: "3 nodes N=30, 80/10/10, 0.5xN", Weights: skew, Offered: 0.5},
		{Name: "3 nodes N=2, even, 1.5xN", N: 2},
		{Name: "3 nodes N=30, 80/10/10, 1.5xN, node 0 killed at 3s", Weights: skew, KillAt: 3 * time.Second},
	} {
		r := RunSlots(s)
		t.Log(r)
		if r.MaxEveryMs > 1 {
			t.Errorf("%s: the fleet held %.3f×N at once", s.Name, r.MaxEveryMs)
		}
		if s.Offered >= 1.5 && s.N == 30 && r.Mean100ms < 0.8 {
			t.Errorf("%s: the fleet used %.3f×N on average", s.Name, r.Mean100ms)
		}
		if s.KillAt > 0 && (r.Reclaimed == 0 || r.Reclaimed > 1500*time.Millisecond) {
			t.Errorf("%s: share reclaimed in %s", s.Name, r.Reclaimed)
		}
	}
}

func TestSlotsDeterministic(t *testing.T) {
	s := SlotScenario{Weights: []float64{0.8, 0.1, 0.1}, Seconds: 3}
	a, b := RunSlots(s), RunSlots(s)
	if a.String() != b.String() {
		t.Fatalf("two runs differ:\n%s\n%s", a, b)
	}
}
