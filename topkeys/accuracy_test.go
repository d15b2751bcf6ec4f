package topkeys

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// zipfKeys is n IPv4-looking keys.
func zipfKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	return keys
}

// zipfStream is n key indexes drawn from Zipf(s = 1.1, v = 1) over
// [0, universe).
func zipfStream(seed uint64, universe, n int) []int32 {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, 0x70b)), 1.1, 1, uint64(universe-1))
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(z.Uint64())
	}
	return idx
}

// TestZipfTop10 is the accuracy the admin API needs: on Zipf traffic
// (s = 1.1) of 1,000,000 requests over 100,000 keys, a DefaultCapacity
// sketch's Top(10) is exactly the true top 10, in the true order.
func TestZipfTop10(t *testing.T) {
	const universe, requests = 100_000, 1_000_000
	seeds := []uint64{1, 2, 3, 4, 5}
	if raceEnabled || testing.Short() {
		seeds = seeds[:1]
	}
	keys := zipfKeys(universe)
	id := make(map[string]int, universe)
	for i, k := range keys {
		id[k] = i
	}
	for _, seed := range seeds {
		stream := zipfStream(seed, universe, requests)
		s := New(DefaultCapacity)
		truth := make([]uint64, universe)
		for _, i := range stream {
			s.Add(keys[i], 1)
			truth[i]++
		}
		// The true order: by count descending, then by key.
		order := make([]int, universe)
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			if c := cmp.Compare(truth[b], truth[a]); c != 0 {
				return c
			}
			return cmp.Compare(keys[a], keys[b])
		})
		top := s.Top(10)
		if len(top) != 10 {
			t.Fatalf("seed %d: Top(10) has %d entries", seed, len(top))
		}
		var maxErr uint64
		for r, e := range top {
			maxErr = max(maxErr, e.Error)
			if want := keys[order[r]]; e.Key != want {
				t.Errorf("seed %d: rank %d is %q (Count %d, Error %d), want %q (true %d)",
					seed, r+1, e.Key, e.Count, e.Error, want, truth[order[r]])
			}
			if w := truth[id[e.Key]]; e.Count < w || e.Count-e.Error > w {
				t.Errorf("seed %d: %q true %d, Count %d, Error %d", seed, e.Key, w, e.Count, e.Error)
			}
		}
		minGap := truth[order[0]]
		for r := range 10 {
			minGap = min(minGap, truth[order[r]]-truth[order[r+1]])
		}
		t.Logf("seed %d: top 10 true counts %d…%d, 11th %d; smallest gap between ranks 1-11 %d; largest Error in Top(10) %d; Bytes %d",
			seed, truth[order[0]], truth[order[9]], truth[order[10]], minGap, maxErr, s.Bytes())
	}
}
