package geo

import (
	"fmt"

	"github.com/oschwald/maxminddb-golang/v2"
)

// An ASN database names tens of thousands of systems, too many for the
// 10-bit values of the country tables, so an ASNDB has tables of its own:
// sorted range starts with a 32-bit value each (0 for no system, i+1 for
// systems[i]), cut in buckets by the addresses' first 16 bits, so that a
// lookup reads two entries of a 256 KiB index and binary-searches a bucket
// of a few ranges, instead of walking the search tree a bit at a time
// (maxminddb's Lookup: about a cache miss a bit, microseconds in a
// database the size of GeoLite2-ASN).
//
// The walk that makes them lists every network but the aliases of the
// IPv4 networks (6to4, Teredo) and ::/96, where an IPv6 database keeps the
// IPv4 ones; the IPv6 table marks those stretches viaTree, and Lookup asks
// maxminddb for them: exact, and rare.

// viaTree marks a stretch of IPv6 addresses that Lookup looks up in the
// search tree.
const viaTree = ^uint32(0)

// asnBucketBits is how many first bits of an address make its bucket.
const asnBucketBits = 16

// rangeTable maps keys (IPv4 addresses, or IPv6 ones as u128) to values:
// the value of a key is that of the last range starting at or before it.
// The first range starts at 0. An IPv6 table keeps its starts' two halves
// in two slices, so that its search reads mostly the first halves, eight
// to a cache line.
type rangeTable[K uint32 | u128] struct {
	starts []K // while building; then hi (and lo, for u128)
	values []uint32
	index  []uint32 // index[j]: the number of starts in buckets before j
	hi     []uint64 // the starts (their first halves, for u128)
	lo     []uint64 // the starts' second halves, for u128
}

// bucket returns the range of starts to search for a key of bucket j:
// from the range holding the bucket's first key to the bucket's last.
func (t *rangeTable[K]) bucket(j uint32) (lo, hi int) {
	return max(int(t.index[j])-1, 0), int(t.index[j+1])
}

// find4 returns the value of IPv4 address a.
func (t *rangeTable[K]) find4(a uint32) uint32 {
	lo, hi := t.bucket(a >> (32 - asnBucketBits))
	key := uint64(a)
	for hi-lo > 1 { // starts[lo] <= key < starts[hi] (or hi is the end)
		mid := int(uint(lo+hi) >> 1)
		if key < t.hi[mid] {
			hi = mid
		} else {
			lo = mid
		}
	}
	return t.values[lo]
}

// find6 returns the value of IPv6 address a.
func (t *rangeTable[K]) find6(a u128) uint32 {
	lo, hi := t.bucket(uint32(a.hi >> (64 - asnBucketBits)))
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if h := t.hi[mid]; a.hi < h || a.hi == h && a.lo < t.lo[mid] {
			hi = mid
		} else {
			lo = mid
		}
	}
	return t.values[lo]
}

// add appends a range starting at start, unless it has the last one's value.
func (t *rangeTable[K]) add(start K, v uint32) {
	if n := len(t.values); n > 0 && t.values[n-1] == v {
		return
	}
	t.starts = append(t.starts, start)
	t.values = append(t.values, v)
}

// finish makes the searched slices and the buckets' index from starts;
// split returns a start's halves (lo 0 for an IPv4 one), and the bucket is
// the first bits of hi.
func (t *rangeTable[K]) finish(split func(K) (hi, lo uint64), bits int) {
	t.values = clip(t.values)
	t.hi = make([]uint64, len(t.starts))
	if bits == 64 {
		t.lo = make([]uint64, len(t.starts))
	}
	for i, s := range t.starts {
		h, l := split(s)
		t.hi[i] = h
		if t.lo != nil {
			t.lo[i] = l
		}
	}
	t.starts = nil
	t.index = make([]uint32, 1<<asnBucketBits+1)
	i := 0
	for j := range uint64(1<<asnBucketBits + 1) {
		for i < len(t.hi) && t.hi[i]>>(bits-asnBucketBits) < j {
			i++
		}
		t.index[j] = uint32(i)
	}
}

func split4(a uint32) (uint64, uint64) { return uint64(a), 0 }
func split6(a u128) (uint64, uint64)   { return a.hi, a.lo }

// asnTables are the range tables of an ASN database.
type asnTables struct {
	v4 rangeTable[uint32]
	v6 rangeTable[u128] // empty for an IPv4-only database
}

func (t *asnTables) bytes() int {
	b := 0
	for _, r := range []struct{ hi, lo, values, index int }{
		{len(t.v4.hi), len(t.v4.lo), len(t.v4.values), len(t.v4.index)},
		{len(t.v6.hi), len(t.v6.lo), len(t.v6.values), len(t.v6.index)},
	} {
		b += 8*(r.hi+r.lo) + 4*(r.values+r.index)
	}
	return b
}

// buildASNTables walks every network of r (checkShared must have passed),
// with the value of each record given by value.
func buildASNTables(r *maxminddb.Reader, value func(maxminddb.Result) (uint32, error)) (asnTables, error) {
	var t asnTables
	var next6 u128 // the first IPv6 address the walk has not reached
	v4only := r.Metadata.IPVersion == 4
	for res := range r.Networks(maxminddb.IncludeNetworksWithoutData()) {
		if err := res.Err(); err != nil {
			return t, err
		}
		p := res.Prefix()
		if !p.IsValid() {
			return t, fmt.Errorf("invalid network")
		}
		v, err := value(res)
		if err != nil {
			return t, err
		}
		start, last, _, err := treeRange(p)
		if err != nil {
			return t, err
		}
		if p.Addr().Is4() {
			t.v4.add(uint32(start.lo), v)
			continue
		}
		if start.less(next6) {
			return t, fmt.Errorf("network %s out of order", p)
		}
		if next6.less(start) {
			t.v6.add(next6, viaTree) // skipped: ::/96 or an alias
		}
		t.v6.add(start, v)
		next6, _ = last.inc()
	}
	if len(t.v4.starts) == 0 || t.v4.starts[0] != 0 {
		t.v4.starts, t.v4.values = append([]uint32{0}, t.v4.starts...), append([]uint32{0}, t.v4.values...)
	}
	t.v4.finish(split4, 32)
	if !v4only {
		if len(t.v6.starts) == 0 {
			t.v6.add(u128{}, viaTree)
		} else if next6 != (u128{}) && next6 != maxU128 {
			t.v6.add(next6, viaTree) // the rest, skipped; wrapped to 0 after the last address
		}
		t.v6.finish(split6, 64)
	}
	return t, nil
}
