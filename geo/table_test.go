package geo

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// clusteredStarts returns n sorted, distinct keys, the first 0, in a few
// dense clusters and spread thinly elsewhere, so that the index makes
// blocks, blocks in blocks, and has keys outside a block's prefix.
func clusteredStarts(rng *rand.Rand, n int) []uint64 {
	keys := []uint64{0}
	for len(keys) < n {
		base := rng.Uint64()
		spread := uint(rng.IntN(64))
		for range 1 + rng.IntN(n/4+1) {
			keys = append(keys, base+rng.Uint64()>>spread)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// The range tables find the last range that starts at or before an
// address, as a binary search of the whole table does.
func TestTable4(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 10, 100, 1000, 30_000} {
		var starts []uint32
		for _, k := range clusteredStarts(rng, n) {
			starts = append(starts, uint32(k>>32))
		}
		starts = slices.Compact(starts)
		values := make([]uint16, len(starts))
		for i := range values {
			values[i] = uint16(i % (1 << valueBits))
		}
		tab := newTable4(starts, values)
		want := func(a uint32) uint16 {
			return values[sort.Search(len(starts), func(i int) bool { return starts[i] > a })-1]
		}
		check := func(a uint32) {
			if got := tab.find(a); got != want(a) {
				t.Fatalf("n=%d: find(%#x) = %d; want %d", n, a, got, want(a))
			}
		}
		for _, s := range starts {
			check(s)
			check(s - 1)
			check(s + 1)
		}
		check(^uint32(0))
		for range 20_000 {
			check(rng.Uint32())
			s := starts[rng.IntN(len(starts))]
			check(s + uint32(rng.IntN(1<<rng.IntN(32))))
		}
		t.Logf("n=%d: %d ranges, %d bytes", n, len(starts), tab.bytes())
	}
}

func TestTable6(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 2, 10, 100, 1000, 30_000} {
		var hi, lo []uint64
		for _, k := range clusteredStarts(rng, n) {
			// Some starts share their first 64 bits.
			los := []uint64{0}
			for range rng.IntN(3) / 2 * rng.IntN(4) {
				los = append(los, rng.Uint64())
			}
			slices.Sort(los)
			for _, l := range slices.Compact(los) {
				hi = append(hi, k)
				lo = append(lo, l)
			}
		}
		values := make([]uint16, len(hi))
		for i := range values {
			values[i] = uint16(i % groupValue) // any value but groupValue
		}
		tab := newTable6(hi, lo, values)
		want := func(h, l uint64) uint16 {
			return values[sort.Search(len(hi), func(i int) bool {
				return hi[i] > h || hi[i] == h && lo[i] > l
			})-1]
		}
		check := func(h, l uint64) {
			if got := tab.find(h, l); got != want(h, l) {
				t.Fatalf("n=%d: find(%#x, %#x) = %d; want %d", n, h, l, got, want(h, l))
			}
		}
		for i := range hi {
			a := u128{hi[i], lo[i]}
			check(a.hi, a.lo)
			if a != (u128{}) {
				b := a.dec()
				check(b.hi, b.lo)
			}
			if b, ok := a.inc(); ok {
				check(b.hi, b.lo)
			}
			check(a.hi+1, 0)
			check(a.hi-1, ^uint64(0))
		}
		check(^uint64(0), ^uint64(0))
		for range 20_000 {
			check(rng.Uint64(), rng.Uint64())
			i := rng.IntN(len(hi))
			check(hi[i]+uint64(rng.IntN(1<<rng.IntN(62))), rng.Uint64())
		}
		t.Logf("n=%d: %d ranges, %d groups, %d bytes", n, len(hi), len(tab.groups.keys), tab.bytes())
	}
}
