package geo

import (
	"math/bits"
	"slices"
	"sort"
)

// table6 is the range table of the IPv6 addresses. Its ranges nearly all
// start on a /64 boundary, so it is kept in two parts: main, over the
// addresses' first 64 bits, and groups, for each /64 that holds more than
// one range (split by a network longer than /64), which main marks with
// groupValue.
type table6 struct {
	main   table64
	groups groups6
	ranges int
}

// find returns the value of the address hi<<64 | lo.
func (t *table6) find(hi, lo uint64) uint16 {
	v := t.main.find(hi)
	if v == groupValue {
		v = t.groups.find(hi, lo)
	}
	return v
}

// bytes returns the table's size in memory.
func (t *table6) bytes() int {
	return t.main.bytes() + t.groups.bytes()
}

// newTable6 makes a table of the ranges, range i starting at
// hi[i]<<64 | lo[i], sorted, the first at 0.
func newTable6(hi, lo []uint64, values []uint16) table6 {
	var starts []uint64
	var vals []uint16
	// add adds a range of main that starts at s; it replaces the last one
	// if that starts at s too.
	add := func(s uint64, v uint16) {
		n := len(starts)
		if n > 0 && starts[n-1] == s {
			starts, vals = starts[:n-1], vals[:n-1]
			n--
		}
		if n > 0 && vals[n-1] == v {
			return
		}
		starts, vals = append(starts, s), append(vals, v)
	}
	var g groups6
	for i := 0; i < len(hi); {
		h := hi[i]
		if lo[i] == 0 && (i+1 == len(hi) || hi[i+1] != h) {
			add(h, values[i]) // the /64 is all in range i (at least)
			i++
			continue
		}
		// A group: the range holding the /64's first address, then those
		// that start in it.
		g.keys = append(g.keys, h)
		g.off = append(g.off, uint32(len(g.lo)))
		if lo[i] != 0 {
			g.lo, g.values = append(g.lo, 0), append(g.values, values[i-1])
		}
		for ; i < len(hi) && hi[i] == h; i++ {
			g.lo, g.values = append(g.lo, lo[i]), append(g.values, values[i])
		}
		add(h, groupValue)
		if h != ^uint64(0) {
			add(h+1, g.values[len(g.values)-1]) // unless a range starts there
		}
	}
	g.off = append(g.off, uint32(len(g.lo)))
	g = groups6{keys: clip(g.keys), off: clip(g.off), lo: clip(g.lo), values: clip(g.values)}
	return table6{main: newTable64(starts, vals), groups: g, ranges: len(hi)}
}

// groups6 holds the ranges of the /64s that hold more than one: the
// ranges of keys[k] are lo[off[k]:off[k+1]], the first starting at 0, with
// their values.
type groups6 struct {
	keys   []uint64
	off    []uint32
	lo     []uint64
	values []uint16
}

// find returns the value of hi<<64 | lo, in one of the groups' /64s.
func (g *groups6) find(hi, lo uint64) uint16 {
	k, ok := slices.BinarySearch(g.keys, hi)
	if !ok {
		return 0 // not reached: main marks only the groups' /64s
	}
	first, last := g.off[k], g.off[k+1]
	i := first + uint32(sort.Search(int(last-first), func(i int) bool { return g.lo[first+uint32(i)] > lo })) - 1
	return g.values[i]
}

func (g *groups6) bytes() int {
	return 8*len(g.keys) + 4*len(g.off) + 8*len(g.lo) + 2*len(g.values)
}

// table64 maps 64-bit keys to values, as table4 does IPv4 addresses: its
// buckets are the keys' first bucketBits6 bits, and bucket j is
// entries[index[j]:index[j+1]], the range holding its first key, then each
// range that starts in it, each as its start shifted left by bucketBits6
// bits (0 for the first) above its value.
//
// IPv6 networks crowd in a few parts of the address space, such as
// 2a00::/12, where a bucket may hold thousands of ranges. A bucket of more
// than denseEntries ranges starts with a header that narrows the search
// further, by the bits that follow those that the starts of its ranges
// share: two entries, meta (the number of those bits, of the bits that
// follow and that the header indexes, and of the header's entries) and
// the shared bits, then, two to an entry, the positions among the
// bucket's ranges of the range holding the first key of each value of the
// bits that follow.
type table64 struct {
	index   []uint32 // 1<<bucketBits6 + 1
	entries []uint64
}

// denseEntries is the most ranges a bucket has without a header: one cache
// line of them.
const denseEntries = 8

// bucketBits6 is how many first bits of a key make its bucket (>=
// valueBits): an entry keeps the other bits of a range's start above its
// value.
const bucketBits6 = 16

// valueMask keeps the value of an entry.
const valueMask = 1<<valueBits - 1

// find returns the value of key.
func (t *table64) find(key uint64) uint16 {
	j := key >> (64 - bucketBits6)
	lo, hi := int(t.index[j]), int(t.index[j+1])
	if hi-lo > denseEntries {
		lo, hi = t.narrow(key, lo, hi)
	}
	e := t.entries[lo:hi]
	return uint16(e[lastAtMost(e, key<<bucketBits6|valueMask)] & valueMask)
}

// narrow returns the entries of the bucket entries[lo:hi], one with a
// header, that can hold key.
func (t *table64) narrow(key uint64, lo, hi int) (int, int) {
	meta, prefix := t.entries[lo], t.entries[lo+1]
	shared, sub, words := uint(meta&63), uint(meta>>6&31), int(meta>>11)
	first := lo + words
	if key&^(^uint64(0)>>shared) != prefix {
		// Before or after every range that starts in the bucket.
		if key < prefix {
			return first, first + 1
		}
		return hi - 1, hi
	}
	s := int(key << shared >> (64 - sub))
	return first + t.position(lo+2, s), first + t.position(lo+2, s+1) + 1
}

// position returns the s-th position of the header whose positions start
// at entries[at].
func (t *table64) position(at, s int) int {
	return int(uint32(t.entries[at+s/2] >> (32 * (s & 1))))
}

func (t *table64) bytes() int {
	return 4*len(t.index) + 8*len(t.entries)
}

// newTable64 makes a table of the ranges; starts is sorted, starts[0] is 0.
func newTable64(starts []uint64, values []uint16) table64 {
	const buckets = 1 << bucketBits6
	t := table64{index: make([]uint32, buckets+1)}
	t.entries = make([]uint64, 0, len(starts)+buckets)
	i := 0
	for j := range uint64(buckets) {
		t.index[j] = uint32(len(t.entries))
		first, last := bucketRanges(starts, i, j, bucketBits6)
		if last-first+1 > denseEntries {
			t.header(starts[first+1 : last+1])
		}
		t.entries = appendRanges(t.entries, starts[first:last+1], values[first:last+1], bucketBits6)
		i = last
	}
	t.index[buckets] = uint32(len(t.entries))
	t.entries = clip(t.entries)
	return t
}

// header appends the header of a bucket whose ranges are the one holding
// its first key, then those that start at inside, more than one.
func (t *table64) header(inside []uint64) {
	first, last := inside[0], inside[len(inside)-1]
	shared := uint(bits.LeadingZeros64(first ^ last))
	prefix := first &^ (^uint64(0) >> shared)
	// About four to eight ranges for each value of the bits that follow:
	// a cache line of them, and a small header, likelier to stay in cache.
	sub := min(max(uint(bits.Len(uint(len(inside)/8))), 1), 16, 64-shared)
	count := 1<<sub + 1
	words := 2 + (count+1)/2
	t.entries = append(t.entries, uint64(shared)|uint64(sub)<<6|uint64(words)<<11, prefix)
	at := len(t.entries)
	t.entries = append(t.entries, make([]uint64, words-2)...)
	// Position p holds the keys from the start of inside[p-1] (from the
	// bucket's first key for p = 0).
	p := 0
	for s := range count - 1 {
		key := prefix | uint64(s)<<(64-shared-sub)
		for p < len(inside) && inside[p] <= key {
			p++
		}
		t.entries[at+s/2] |= uint64(p) << (32 * (s & 1))
	}
	s := count - 1
	t.entries[at+s/2] |= uint64(len(inside)) << (32 * (s & 1))
}
