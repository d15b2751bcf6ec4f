package geo

import "math/bits"

// The range tables map every address to a value: 0 for an unknown country,
// codeIndex+1 for a country, or, in the IPv6 table only, aliasValue(n)
// for an alias of the IPv4 networks (see alias.go) or groupValue (see
// table6). A table is made from a sorted list of range starts, the first
// 0, each with the value of the addresses from it up to the next start;
// adjacent ranges have different values.
//
// Lookups are bound by memory latency, not by computing: the table of a
// Country database takes megabytes, and a random address misses the CPU
// caches. So a table is cut in buckets by the addresses' first bits, with
// an index small enough to stay in cache, and each bucket packs its
// ranges' starts with their values, so that a lookup mostly reads one or
// two cache lines past the index.

// A value takes valueBits bits: the codes take 1 to numCodes, the aliases
// aliasBase to aliasBase+128.
const (
	valueBits  = 10
	aliasBase  = 1<<valueBits - 256
	groupValue = 1<<valueBits - 1
)

// table4 is the range table of the IPv4 addresses, cut in buckets by the
// addresses' first bucketBits4 bits. The entries of bucket j are
// entries[index[j]:index[j+1]]: the range holding its first address, then
// each range that starts in it, each as the other bits of its start (0
// for the first) above its value. A lookup reads one entry of index and a
// binary search of the bucket's entries, a few cache lines at most.
type table4 struct {
	index   []uint32 // 1<<bucketBits4 + 1
	entries []uint32
	ranges  int
}

// bucketBits4 is how many first bits of an IPv4 address make its bucket;
// an entry keeps the other bits of a range's start above the range's
// value, which must fit in bucketBits4 bits (bucketBits4 >= valueBits).
// 14 bits make an index of 64 KiB, likely to stay in cache, and buckets of
// a few cache lines in a Country database.
const bucketBits4 = 14

// find returns the value of a.
func (t *table4) find(a uint32) uint16 {
	const valueMask = 1<<bucketBits4 - 1
	j := a >> (32 - bucketBits4)
	lo, hi := int(t.index[j]), int(t.index[j+1])
	e := t.entries[lo:hi]
	return uint16(e[lastAtMost(e, a<<bucketBits4|valueMask)] & valueMask)
}

// lastAtMost returns the index of the last entry of e that is at most
// key, where e is sorted and e[0] <= key: a binary search that always
// halves, with no early exit.
func lastAtMost[T uint32 | uint64](e []T, key T) int {
	i := 0
	for n := len(e); n > 1; {
		half := n / 2
		if e[i+half] <= key {
			i += half
		}
		n -= half
	}
	return i
}

// bytes returns the table's size in memory.
func (t *table4) bytes() int {
	return 4*len(t.index) + 4*len(t.entries)
}

// newTable4 makes a table of the ranges; starts is sorted, starts[0] is 0.
func newTable4(starts []uint32, values []uint16) table4 {
	const buckets = 1 << bucketBits4
	t := table4{index: make([]uint32, buckets+1), ranges: len(starts)}
	t.entries = make([]uint32, 0, len(starts)+buckets)
	i := 0
	for j := range uint32(buckets) {
		t.index[j] = uint32(len(t.entries))
		first, last := bucketRanges(starts, i, j, bucketBits4)
		t.entries = appendRanges(t.entries, starts[first:last+1], values[first:last+1], bucketBits4)
		i = last
	}
	t.index[buckets] = uint32(len(t.entries))
	t.entries = clip(t.entries)
	return t
}

// bucketRanges returns the ranges of bucket j, the keys whose first
// bucketBits bits are j: from first, the range holding the bucket's first
// key, to last, the last range that starts in the bucket (first if none
// does). from is the last range of the bucket before, or 0.
func bucketRanges[K uint32 | uint64](starts []K, from int, j K, bucketBits int) (first, last int) {
	shift := bits.Len64(uint64(^K(0))) - bucketBits
	first = from
	for first+1 < len(starts) && starts[first+1] <= j<<shift {
		first++
	}
	last = first
	for last+1 < len(starts) && starts[last+1]>>shift == j {
		last++
	}
	return first, last
}

// appendRanges appends the entries of a bucket's ranges to entries: the
// value of the first (the range holding the bucket's first key), then each
// other's start shifted left by bucketBits, with its value in the bits
// freed.
func appendRanges[K uint32 | uint64](entries, starts []K, values []uint16, bucketBits int) []K {
	entries = append(entries, K(values[0]))
	for i := 1; i < len(starts); i++ {
		entries = append(entries, starts[i]<<bucketBits|K(values[i]))
	}
	return entries
}
