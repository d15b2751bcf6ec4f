package limiter

import (
	"testing"
	"time"
)

// TestAdoptCarriesMatchingLimits: a rule that gains a limit and a burst
// bucket keeps what its keys took under the limit they share.
func TestAdoptCarriesMatchingLimits(t *testing.T) {
	for _, algo := range []Algorithm{SlidingWindow, FixedWindow, SlidingLog, TokenBucket} {
		t.Run(string(algo), func(t *testing.T) {
			old := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}}})
			for range 3 {
				old.AllowAt("k", base, 1)
			}
			cfg := Config{Algorithm: algo, Limits: []Limit{{100, 24 * time.Hour}, {5, time.Hour}}}
			if algo != TokenBucket {
				cfg.Burst = 10
			}
			if old.Keeps(cfg) {
				t.Fatal("Keeps: the layout changed, want false")
			}
			next, err := old.Successor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			next.Adopt(old)
			admitted := 0
			for range 5 {
				if next.AllowAt("k", base, 1).Allowed {
					admitted++
				}
			}
			if admitted != 2 {
				t.Fatalf("admitted %d after adoption, want 2 (5 − the 3 taken before)", admitted)
			}
			if d := next.PeekAt("k", base, 0); d.Quotas[0].Remaining != 98 {
				t.Fatalf("new daily limit: %d remaining, want 98 (it starts afresh)", d.Quotas[0].Remaining)
			}
		})
	}
}

// TestAdoptKeepsNewerState: a key the successor has already seen keeps its
// own state.
func TestAdoptKeepsNewerState(t *testing.T) {
	old := mustNew(t, Config{Limits: []Limit{{5, time.Hour}}})
	old.AllowAt("k", base, 5)
	next, err := old.Successor(Config{Limits: []Limit{{5, time.Hour}}, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	next.AllowAt("k", base, 1)
	next.Adopt(old)
	if d := next.PeekAt("k", base, 0); d.Quotas[0].Remaining != 4 {
		t.Fatalf("%d remaining, want 4: the successor's own state wins", d.Quotas[0].Remaining)
	}
}

// TestAdoptAcrossAlgorithms: another algorithm starts afresh.
func TestAdoptAcrossAlgorithms(t *testing.T) {
	old := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{5, time.Hour}}})
	old.AllowAt("k", base, 5)
	next, err := old.Successor(Config{Algorithm: TokenBucket, Limits: []Limit{{5, time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	next.Adopt(old)
	if d := next.PeekAt("k", base, 0); d.Quotas[0].Remaining != 5 {
		t.Fatalf("%d remaining, want 5", d.Quotas[0].Remaining)
	}
}

// TestAdoptOnlyFromPredecessor: a Limiter not made by Successor is left alone.
func TestAdoptOnlyFromPredecessor(t *testing.T) {
	old := mustNew(t, Config{Limits: []Limit{{5, time.Hour}}})
	old.AllowAt("k", base, 5)
	other := mustNew(t, Config{Limits: []Limit{{5, time.Hour}}, Burst: 2})
	other.Adopt(old)
	if other.Len() != 0 {
		t.Fatalf("Len %d, want 0", other.Len())
	}
}
