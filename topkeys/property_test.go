package topkeys

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSpaceSavingGuarantee checks on random streams, with resets, that
// every tracked key has true ≤ Count ≤ true+Error and that no untracked key
// weighs more than its shard's last eviction, nor more than W/k with k the
// slots per shard — hence every key heavier than W/k is tracked.
func TestSpaceSavingGuarantee(t *testing.T) {
	for _, capacity := range []int{1, 5, 40, 200, DefaultCapacity} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("cap%d/seed%d", capacity, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(capacity)))
				universe := 3*capacity + 10
				keys := make([]string, universe)
				for i := range keys {
					keys[i] = fmt.Sprintf("key-%d", i)
					if i%17 == 0 { // some long keys, two of each prefix
						keys[i] = strings.Repeat("L", MaxKeyLen) + fmt.Sprint(i%34)
					}
				}
				zipf := rand.NewZipf(r, 1.2, 1, uint64(universe-1))
				ops := 20000
				if raceEnabled {
					ops = 5000
				}
				s, m := New(capacity), newModel()
				for op := range ops {
					var key string
					if op%2 == 0 {
						key = keys[zipf.Uint64()]
					} else {
						key = keys[r.IntN(universe)]
					}
					switch x := r.IntN(100); {
					case x == 0:
						s.Reset(key)
						m.reset(key)
					case x < 5:
						w := r.Uint64N(1000) + 1
						s.Add(key, w)
						m.add(key, w)
					default:
						s.Add(key, 1)
						m.add(key, 1)
					}
					if op%1000 == 999 {
						checkGuarantees(t, s, m)
					}
				}
				checkGuarantees(t, s, m)
			})
		}
	}
}

// TestSumOfCountsIsTotal: without Reset, the counts of a Space-Saving
// summary add up to the weight it was fed.
func TestSumOfCountsIsTotal(t *testing.T) {
	s := New(100)
	r := rand.New(rand.NewPCG(1, 2))
	var total uint64
	for range 50000 {
		w := r.Uint64N(10) + 1
		s.Add(fmt.Sprint(r.IntN(1000)), w)
		total += w
	}
	var sum uint64
	for _, e := range s.Top(0) {
		sum += e.Count
	}
	if sum != total || s.Total() != total {
		t.Fatalf("sum of counts %d, Total %d, want %d", sum, s.Total(), total)
	}
}
