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
// The first range starts at 0.
type rangeTable[K uint32 | u128] struct {
	starts []K
	values []uint32
	index  []uint32 // index[j]: the number of starts in buckets before j
}

// find returns the value of key, which is in bucket j.
func (t *rangeTable[K]) find(key K, j uint32, less func(a, b K) bool) uint32 {
	// From the range holding the bucket's first key to the bucket's last.
	lo, hi := int(t.index[j]), int(t.index[j+1])
	lo = max(lo-1, 0)
	for hi-lo > 1 { // starts[lo] <= key < starts[hi] (or hi is the end)
		mid := int(uint(lo+hi) >> 1)
		if less(key, t.starts[mid]) {
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

// finish makes the buckets' index; bucket returns a start's bucket.
func (t *rangeTable[K]) finish(bucket func(K) uint32) {
	t.starts, t.values = clip(t.starts), clip(t.values)
	t.index = make([]uint32, 1<<asnBucketBits+1)
	i := 0
	for j := range uint32(1<<asnBucketBits + 1) {
		for i < len(t.starts) && bucket(t.starts[i]) < j {
			i++
		}
		t.index[j] = uint32(i)
	}
}

func bucket4(a uint32) uint32 { return a >> (32 - asnBucketBits) }
func bucket6(a u128) uint32   { return uint32(a.hi >> (64 - asnBucketBits)) }
func less4(a, b uint32) bool  { return a < b }

// asnTables are the range tables of an ASN database.
type asnTables struct {
	v4 rangeTable[uint32]
	v6 rangeTable[u128] // empty for an IPv4-only database
}

func (t *asnTables) bytes() int {
	return 4*len(t.v4.starts) + 16*len(t.v6.starts) + 4*(len(t.v4.values)+len(t.v6.values)+len(t.v4.index)+len(t.v6.index))
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
	t.v4.finish(bucket4)
	if !v4only {
		if len(t.v6.starts) == 0 {
			t.v6.add(u128{}, viaTree)
		} else if next6 != (u128{}) && next6 != maxU128 {
			t.v6.add(next6, viaTree) // the rest, skipped; wrapped to 0 after the last address
		}
		t.v6.finish(bucket6)
	}
	return t, nil
}
