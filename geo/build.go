package geo

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/oschwald/maxminddb-golang/v2"
)

// errTooManyNetworks is returned for a search tree whose nodes share
// subtrees so much that walking it would not end.
var errTooManyNetworks = errors.New("search tree holds more networks than a tree of its size can")

// tableBuilder walks every network of a database, in address order, and
// lists the ranges of the tables: ranges of IPv4 addresses, and of IPv6
// ones, whose value is a country's codeIndex+1, 0 for none, or, for IPv6,
// an alias of the IPv4 ones (alias.go), ::/96 included.
type tableBuilder struct {
	r      *maxminddb.Reader
	v4only bool

	starts4 []uint32
	values4 []uint16
	hi6     []uint64
	lo6     []uint64
	values6 []uint16

	// values holds the value of each record read so far, by its offset:
	// many networks share a record, whose country is decoded once.
	values    map[uintptr]uint16
	lastOff   uintptr // the last record, whose value is lastValue
	lastValue uint16
	haveLast  bool

	// v4Depth is how much deeper than ::/96 the first IPv4 network is (0
	// if it holds ::/96 or more).
	v4Depth int
}

// buildTables reads every network of r into range tables; the IPv6 one is
// empty for an IPv4-only database. checkShared must have passed.
func buildTables(r *maxminddb.Reader) (table4, table6, error) {
	b := tableBuilder{
		r:      r,
		v4only: r.Metadata.IPVersion == 4,
		values: make(map[uintptr]uint16),
	}
	if err := b.walk(); err != nil {
		return table4{}, table6{}, err
	}
	b.values = nil
	t4 := newTable4(b.starts4, b.values4)
	if b.v4only {
		return t4, table6{}, nil
	}
	return t4, newTable6(b.hi6, b.lo6, b.values6), nil
}

// walk adds every network of the database, and the stretches between them
// that Networks skips.
func (b *tableBuilder) walk() error {
	end := maxU128
	if b.v4only {
		end = lastIPv4
	}
	next, done, first := u128{}, false, true
	for res := range b.r.Networks(maxminddb.IncludeNetworksWithoutData()) {
		if err := res.Err(); err != nil {
			return err
		}
		start, last, bits, err := treeRange(res.Prefix())
		if err != nil {
			return err
		}
		if done || start.less(next) || end.less(last) {
			return fmt.Errorf("network %s out of order", res.Prefix())
		}
		if first {
			b.v4Depth = max(bits-96, 0)
			first = false
		}
		if next.less(start) {
			if err := b.gap(next, start.dec()); err != nil {
				return err
			}
		}
		b.add(start, last, b.value(res))
		next, _ = last.inc()
		done = last == end
	}
	if !done {
		return b.gap(next, end)
	}
	return nil
}

// maxNetworks bounds the number of networks, empty ones and aliases
// included, of a search tree of r's size: a tree of n nodes has n+1
// leaves, and each alias of the IPv4 networks repeats those, which are
// fewer (MaxMind's databases have three aliases; the bound allows seven).
func maxNetworks(r *maxminddb.Reader) int {
	nodes := int(min(r.Metadata.NodeCount, 1<<40))
	return 8*(nodes+1) + 64
}

// checkShared fails if the search tree holds more networks than
// maxNetworks allows. maxminddb accepts a tree whose nodes share subtrees
// other than the IPv4 networks, and such a tree can hold a vast number of
// networks in a few nodes (2^100 in 100, say): a walk of it would not end,
// even one that skips aliases or empty networks, since a shared subtree
// may hold nothing else. So checkShared counts every network, the only
// walk that is sure to end, and the walks that follow (hasCountries,
// buildTables) take no more steps than it.
func checkShared(r *maxminddb.Reader) error {
	n := maxNetworks(r)
	for range r.Networks(maxminddb.IncludeAliasedNetworks(), maxminddb.IncludeNetworksWithoutData()) {
		if n--; n < 0 {
			return errTooManyNetworks
		}
	}
	return nil
}

// gap adds [first, last], addresses that Networks skipped: aliases of the
// IPv4 networks. Networks skips nothing in the IPv4 networks, but if it
// did, their addresses would have no country.
func (b *tableBuilder) gap(first, last u128) error {
	if b.v4only || !lastIPv4.less(first) {
		b.add(first, last, 0)
		return nil
	}
	return b.aliases(first, last)
}

// treeRange returns the first and last tree addresses of a network as
// Networks gives it, and its prefix length in the tree.
func treeRange(p netip.Prefix) (first, last u128, bits int, err error) {
	if !p.IsValid() {
		return u128{}, u128{}, 0, errors.New("invalid network")
	}
	bits = p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	first = u128From(p.Addr())
	return first, first.or(hostMask(bits)), bits, nil
}

// add adds the range [first, last], which starts where the last one added
// ended, with value v.
func (b *tableBuilder) add(first, last u128, v uint16) {
	if !lastIPv4.less(first) {
		b.add4(uint32(first.lo), v)
		if b.v4only {
			return
		}
		// Country looks ::a.b.c.d up as a.b.c.d, as maxminddb does.
		b.add6(first, aliasValue(96))
		if !lastIPv4.less(last) {
			return
		}
		first = u128{0, 1 << 32}
	}
	b.add6(first, v)
}

func (b *tableBuilder) add4(first uint32, v uint16) {
	if n := len(b.values4); n > 0 && b.values4[n-1] == v {
		return
	}
	b.starts4 = append(b.starts4, first)
	b.values4 = append(b.values4, v)
}

func (b *tableBuilder) add6(first u128, v uint16) {
	if n := len(b.values6); n > 0 && b.values6[n-1] == v {
		return
	}
	b.hi6 = append(b.hi6, first.hi)
	b.lo6 = append(b.lo6, first.lo)
	b.values6 = append(b.values6, v)
}

// value returns the value of a network's record: its country's
// codeIndex+1, or 0 if it has none or is empty.
func (b *tableBuilder) value(res maxminddb.Result) uint16 {
	if !res.Found() {
		return 0
	}
	off := res.Offset()
	if b.haveLast && off == b.lastOff {
		return b.lastValue
	}
	v, ok := b.values[off]
	if !ok {
		v = uint16(decodeCode(res) + 1)
		b.values[off] = v
	}
	b.lastOff, b.lastValue, b.haveLast = off, v, true
	return v
}

// clip returns s without spare capacity, so that the tables hold no more
// memory than they use.
func clip[T any](s []T) []T {
	c := make([]T, len(s))
	copy(c, s)
	return c
}
