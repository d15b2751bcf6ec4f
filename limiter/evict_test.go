package limiter

import (
	"strconv"
	"testing"
	"time"
)

// spend takes key's units until a request is denied, and returns how many
// passed.
func spend(t *testing.T, l *Limiter, key string, now time.Time) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		if !l.AllowAt(key, now, 1).Allowed {
			return n
		}
	}
	t.Fatalf("%s: 1000 requests passed", key)
	return 0
}

// The attack of a bypass hunt: a client spends its key, then floods the
// rule with one-shot keys so that its own is evicted and comes back whole.
// A spent key outlives any number of keys that are not.
func TestSpentKeyOutlivesFlood(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, burst := range []int64{0, 3} {
			t.Run(string(algo)+"/burst="+strconv.FormatInt(burst, 10), func(t *testing.T) {
				l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}}, Burst: burst, MaxKeys: 1000})
				passed := spend(t, l, "victim", base)
				for i := range 20_000 {
					now := base.Add(time.Duration(i) * time.Millisecond)
					if !l.AllowAt("junk-"+strconv.Itoa(i), now, 1).Allowed {
						t.Fatalf("junk key %d denied", i)
					}
				}
				now := base.Add(20 * time.Second)
				if d := l.AllowAt("victim", now, 1); d.Allowed {
					t.Fatalf("after 20,000 junk keys the victim (%d passed before) passes again: %+v", passed, d.Quotas[0])
				}
				all, spent := l.EvictionCounts()
				if all < 19_000 || spent != 0 {
					t.Fatalf("evictions %d, of spent keys %d; want ≥ 19,000 and 0", all, spent)
				}
				if l.Len() > 1000 {
					t.Fatalf("%d keys held, bound 1000", l.Len())
				}
			})
		}
	}
}

// A key denied for a cost above what it has left is not spent: it still
// has units, and is evicted like any other.
func TestDeniedForCostIsNotSpent(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{5, time.Hour}}, MaxKeys: 1024})
	if d := l.AllowAt("big", base, 6); d.Allowed {
		t.Fatal("a cost of 6 passed a limit of 5")
	}
	for i := range 5000 {
		l.AllowAt("junk-"+strconv.Itoa(i), base, 1)
	}
	if l.Contains("big") {
		t.Fatal("a key with all its units outlived 5,000 junk keys")
	}
	if _, spent := l.EvictionCounts(); spent != 0 {
		t.Fatalf("%d spent keys evicted, want 0", spent)
	}
}

// A key's first request never marks it spent, even at a limit of 1: keys
// sent once are evicted before it.
func TestOneShotKeysAtLimitOneAreNotSpent(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{1, time.Hour}}, MaxKeys: 1024})
	spend(t, l, "victim", base)
	for i := range 5000 {
		l.AllowAt("junk-"+strconv.Itoa(i), base, 1)
	}
	if l.AllowAt("victim", base, 1).Allowed {
		t.Fatal("the victim passes again after 5,000 junk keys")
	}
	if _, spent := l.EvictionCounts(); spent != 0 {
		t.Fatalf("%d spent keys evicted, want 0", spent)
	}
}

// When every key of a shard is spent (each key sent until denied), spent
// keys go, least recently used first, and are counted apart; the bound
// holds.
func TestAllSpentEvictsSpent(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{1, time.Hour}}, MaxKeys: 1024})
	for i := range 5000 {
		spend(t, l, "k"+strconv.Itoa(i), base)
	}
	all, spent := l.EvictionCounts()
	if all != 5000-1024 || spent != all {
		t.Fatalf("evictions %d, of spent keys %d; want %d of both", all, spent, 5000-1024)
	}
	if l.Len() != 1024 {
		t.Fatalf("%d keys held, want 1024", l.Len())
	}
}

// A spent key whose window has passed is idle: the sweep frees it, and it
// is not counted as a spent key evicted.
func TestSpentKeyIdleLaterIsSwept(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{2, time.Minute}}, MaxKeys: 1024})
	spend(t, l, "old", base)
	if l.SweepAt(base.Add(time.Minute)) != 0 {
		t.Fatal("the sweep freed a key still spent")
	}
	if l.SweepAt(base.Add(2*time.Minute)) != 1 || l.Contains("old") || l.shardSpent() != 0 {
		t.Fatal("the sweep kept an idle key, or its count")
	}
	if _, spent := l.EvictionCounts(); spent != 0 {
		t.Fatalf("%d spent keys evicted, want 0", spent)
	}
}

// A key that takes units again after a window passes is no longer spent.
func TestSpentClearsWhenUnitsReturn(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{2, time.Minute}}, MaxKeys: 1024})
	spend(t, l, "k", base)
	if l.shardSpent() != 1 {
		t.Fatalf("spent keys %d, want 1", l.shardSpent())
	}
	l.AllowAt("k", base.Add(time.Minute), 1) // 1 of 2 left in the new window
	if l.shardSpent() != 0 {
		t.Fatalf("spent keys %d, want 0", l.shardSpent())
	}
	l.Delete("k")
	if l.shardSpent() != 0 || l.Len() != 0 {
		t.Fatal("Delete left a count")
	}
}

// shardSpent is the number of spent keys over all shards.
func (l *Limiter) shardSpent() int {
	n := 0
	for i := range l.shards {
		n += l.shards[i].table.spent
	}
	return n
}
