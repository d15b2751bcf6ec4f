package geo

import (
	"fmt"
	"net/netip"

	"github.com/oschwald/maxminddb-golang/v2"
)

// An IPv6 database keeps its IPv4 networks at ::/96 and may alias that
// subtree elsewhere: MaxMind's databases, and mmdbwriter's by default, do
// so at ::ffff:0:0/96 (IPv4-mapped), 2001::/32 (Teredo) and 2002::/16
// (6to4). A lookup that reaches an alias at depth n of the search tree goes
// on in the IPv4 networks with the address's next bits, so that maxminddb
// finds 2002:808:808:: where it finds 8.8.8.8.
//
// Networks skips every alias, whatever its place, so the stretches of
// addresses that the walk of Open skips are exactly the aliases. The IPv6
// table marks each with aliasValue(n), and find6 looks the embedded IPv4
// address up in the IPv4 table: the aliases cost a few ranges, not a copy
// of the IPv4 table. ::/96 itself is marked as an alias at depth 96, so
// the IPv6 table does not repeat the IPv4 networks either.

// aliasValue is the value of an alias at depth n of the tree.
func aliasValue(n int) uint16 { return aliasBase + uint16(n) }

// find6 returns the value of an IPv6 address, hi<<64 | lo: aliases are
// followed to the IPv4 table.
func (db *DB) find6(hi, lo uint64) uint16 {
	v := db.v6.find(hi, lo)
	if v >= aliasBase {
		v = db.v4.find(embeddedIPv4(hi, lo, uint(v-aliasBase)))
	}
	return v
}

// embeddedIPv4 returns the 32 bits of hi<<64 | lo that follow its first n
// bits, as an alias at depth n reads them (8.8.8.8 in 2002:808:808:: for
// n = 16); zeros past the end of the address.
func embeddedIPv4(hi, lo uint64, n uint) uint32 {
	switch {
	case n >= 128:
		return 0
	case n >= 64:
		return uint32(lo << (n - 64) >> 32)
	}
	return uint32((hi<<n | lo>>(64-n)) >> 32)
}

// aliases marks [first, last], addresses that Networks skipped, as the
// aliases they are. An alias is a subtree, an aligned block of addresses,
// and adjacent ones may have different depths, so the stretch is taken
// block by block: each is the largest that starts at first and fits, and
// holds the alias that starts there (an alias is aligned), at its depth
// or deeper, which aliasDepth finds.
func (b *tableBuilder) aliases(first, last u128) error {
	for {
		n := blockBits(first, last)
		depth, err := b.aliasDepth(netip.PrefixFrom(first.addr(), n))
		if err != nil {
			return err
		}
		if depth < n {
			return fmt.Errorf("alias of the IPv4 networks at %s is at depth %d", first.addr(), depth)
		}
		b.add6(first, aliasValue(depth))
		end := first.or(hostMask(depth))
		if end == last {
			return nil
		}
		first, _ = end.inc()
	}
}

// aliasDepth returns the depth in the tree of the alias that holds the
// first address of p. Its first network is the first IPv4 network, seen
// through the alias: it is as much deeper than the alias as that network
// is deeper than ::/96 (v4Depth).
func (b *tableBuilder) aliasDepth(p netip.Prefix) (int, error) {
	for res := range b.r.NetworksWithin(p, maxminddb.IncludeAliasedNetworks(), maxminddb.IncludeNetworksWithoutData()) {
		if err := res.Err(); err != nil {
			return 0, err
		}
		start, _, bits, err := treeRange(res.Prefix())
		if err != nil {
			return 0, err
		}
		if start != u128From(p.Addr()) {
			return 0, fmt.Errorf("alias at %s starts at %s", p, start.addr())
		}
		return bits - b.v4Depth, nil
	}
	return 0, fmt.Errorf("no network in alias %s", p)
}
