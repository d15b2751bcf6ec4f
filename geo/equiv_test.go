package geo

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"
)

// reference answers as Country did when it looked addresses up in the
// file with maxminddb: Lookup, then the record's country.iso_code if it is
// two letters.
type reference struct {
	r     *maxminddb.Reader
	codes map[uintptr]string // by record offset, to keep the test fast
}

func newReference(tb testing.TB, path string) *reference {
	tb.Helper()
	r, err := maxminddb.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return &reference{r: r, codes: map[uintptr]string{}}
}

func (ref *reference) country(addr netip.Addr) string {
	addr = addr.Unmap()
	if !addr.IsValid() || (ref.r.Metadata.IPVersion == 4 && addr.Is6()) {
		return ""
	}
	res := ref.r.Lookup(addr)
	if !res.Found() {
		return ""
	}
	if code, ok := ref.codes[res.Offset()]; ok {
		return code
	}
	var s string
	code := ""
	if err := res.DecodePath(&s, "country", "iso_code"); err == nil && stringIndex(s) >= 0 {
		code = codeStrings[stringIndex(s)]
	}
	ref.codes[res.Offset()] = code
	return code
}

// aliasPrefixes are where MaxMind's databases alias the IPv4 networks,
// and ::/96, where they keep them.
var aliasPrefixes = []netip.Prefix{
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0/96"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2002::/16"),
}

// aliasesOf returns a, an IPv4 address, as seen through each alias prefix.
func aliasesOf(a netip.Addr) []netip.Addr {
	b4 := a.As4()
	var out []netip.Addr
	for _, p := range aliasPrefixes {
		b := p.Addr().As16()
		at := p.Bits() / 8
		copy(b[at:], b4[:])
		out = append(out, netip.AddrFrom16(b))
	}
	return out
}

// randomIn returns a random address of p.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	bits := p.Bits()
	base := p.Addr().AsSlice()
	for i := range base {
		keep := min(max(bits-8*i, 0), 8)
		mask := byte(0xff << (8 - keep))
		if keep == 0 {
			mask = 0
		}
		b[i] = base[i]&mask | b[i]&^mask
	}
	a, _ := netip.AddrFromSlice(b[:len(base)])
	return a
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		keep := min(max(p.Bits()-8*i, 0), 8)
		b[i] |= byte(0xff >> keep)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// checkEquivalent compares Country with the reference on the first and
// last address of every network of the database, aliases included, the
// addresses just before and after them, all of them as seen through each
// alias prefix too, and on random addresses: nRandom of each family,
// anywhere, in busy parts of the address space and in the networks.
func checkEquivalent(t *testing.T, tdb testDB, nRandom int) {
	t.Helper()
	db := openDB(t, tdb.path)
	ref := newReference(t, tdb.path)
	got := func(addr netip.Addr) string {
		code, ok := db.Country(addr)
		if ok != (code != "") {
			return "ok mismatch"
		}
		return code
	}
	if checkLookups(t, "Country", tdb, nRandom, got, ref.country) > 0 {
		t.Logf("%s: %+v", tdb.path, db.Info())
	}
}

// checkLookups compares got with want (maxminddb's answers) on the
// addresses that checkEquivalent lists, and returns the number of
// differences.
func checkLookups(t *testing.T, name string, tdb testDB, nRandom int, got, want func(netip.Addr) string) int {
	t.Helper()
	ref := newReference(t, tdb.path)
	rng := rand.New(rand.NewPCG(uint64(len(tdb.data)), 7))
	fails := 0
	check := func(addr netip.Addr) {
		if g, w := got(addr), want(addr); g != w && fails < 20 {
			fails++
			t.Errorf("%s(%s) = %q; maxminddb says %q", name, addr, g, w)
		}
	}
	checkAll := func(addr netip.Addr) {
		if !addr.IsValid() {
			return
		}
		check(addr)
		if addr.Is4() {
			for _, a := range aliasesOf(addr) {
				check(a)
			}
		}
	}
	var nets []netip.Prefix
	for res := range ref.r.Networks(maxminddb.IncludeAliasedNetworks(), maxminddb.IncludeNetworksWithoutData()) {
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		p := res.Prefix()
		nets = append(nets, p)
		first, last := p.Masked().Addr(), lastAddr(p)
		checkAll(first)
		checkAll(last)
		checkAll(first.Prev())
		checkAll(last.Next())
	}
	for range nRandom {
		// Anywhere.
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		checkAll(netip.AddrFrom4([4]byte(b[:4])))
		check(netip.AddrFrom16(b))
		// In the global unicast space, in an alias, in a network.
		check(randomIn(rng, netip.MustParsePrefix("2000::/4")))
		check(randomIn(rng, aliasPrefixes[rng.IntN(len(aliasPrefixes))]))
		checkAll(randomIn(rng, nets[rng.IntN(len(nets))]))
	}
	// Zones are ignored.
	for _, p := range nets[:min(len(nets), 100)] {
		if a := p.Addr(); a.Is6() {
			check(a.WithZone("eth0"))
		}
	}
	return fails
}

// randomNetworks returns n networks of random places and sizes, over
// records of both layouts and some that name no country: IPv4 ones of /8
// to /32, and unless v4only IPv6 ones of /12 to /128, mostly in the busy
// parts of the global unicast space. Smaller ones overlap larger ones.
func randomNetworks(rng *rand.Rand, n int, v4only bool) []network {
	var codes []string
	for i := range numCodes {
		if assigned[i] {
			codes = append(codes, codeStrings[i])
		}
	}
	records := make([]mmdbtype.Map, 64)
	for i := range records {
		c := place(codes[rng.IntN(len(codes))], uint32(i), "Country", "Land")
		if i%2 == 0 {
			records[i] = countryRecord(europe, c)
		} else {
			records[i] = cityRecord(europe, c, fmt.Sprint("City ", i), 1, 2)
		}
	}
	for _, odd := range oddNetworks {
		records = append(records, odd.record)
	}
	busy := []netip.Prefix{
		netip.MustParsePrefix("2001::/16"), netip.MustParsePrefix("2400::/12"),
		netip.MustParsePrefix("2600::/12"), netip.MustParsePrefix("2a00::/12"),
		netip.MustParsePrefix("2a02:6b8::/32"), netip.MustParsePrefix("2000::/3"),
		netip.MustParsePrefix("::/0"),
	}
	var nets []network
	for range n {
		var p netip.Prefix
		if v4only || rng.IntN(2) == 0 {
			p = netip.PrefixFrom(randomIn(rng, netip.MustParsePrefix("0.0.0.0/0")), 8+rng.IntN(25))
		} else {
			in := busy[rng.IntN(len(busy))]
			bits := in.Bits() + 4 + rng.IntN(48)
			if rng.IntN(8) == 0 {
				bits = 64 + rng.IntN(65)
			}
			p = netip.PrefixFrom(randomIn(rng, in), min(bits, 128))
		}
		nets = append(nets, network{p.Masked().String(), records[rng.IntN(len(records))]})
	}
	// Larger networks first, so that each insertion splits one network
	// rather than replacing many (the writer is slow at that).
	slices.SortStableFunc(nets, func(a, b network) int {
		return netip.MustParsePrefix(a.cidr).Bits() - netip.MustParsePrefix(b.cidr).Bits()
	})
	return nets
}

// buildRandomDB writes a database of nets made with opts, leaving out the
// networks that the writer refuses (reserved or aliased ones).
func buildRandomDB(tb testing.TB, opts mmdbwriter.Options, nets []network) testDB {
	tb.Helper()
	return buildTree(tb, opts, nets, false)
}

// equivSizes returns the number of random networks of the large database
// and of the others, and of random addresses to check in the large one and
// in each other: fewer under the race detector, which slows maxminddb's
// lookups and the writer down a lot, and in -short.
func equivSizes() (largeNets, nets, largeAddrs, addrs int) {
	switch {
	case raceEnabled:
		return 3_000, 300, 10_000, 2_000
	case testing.Short():
		return 5_000, 500, 20_000, 5_000
	}
	return 25_000, 1000, 100_000, 20_000
}

// Country answers as maxminddb does on the same file, in every layout.
func TestCountryEquivalent(t *testing.T) {
	nLarge, nNets, nLargeAddrs, nAddrs := equivSizes()
	rng := rand.New(rand.NewPCG(3, 4))
	opts := func(dbType string, ipVersion, recordSize int) mmdbwriter.Options {
		return mmdbwriter.Options{
			DatabaseType: dbType,
			Description:  map[string]string{"en": "edgelimit test database"},
			IPVersion:    ipVersion,
			RecordSize:   recordSize,
		}
	}
	// Networks in the places that MaxMind's databases alias, for the
	// databases that do not.
	inAliases := []network{
		{"2002:808:800::/40", countryRecord(europe, britain)},
		{"2001:0:a00::/40", countryRecord(europe, sweden)},
		{"::ffff:5.255.0.0/112", countryRecord(asia, china)},
		{"::ffff:0:0/100", countryRecord(europe, sweden)},
	}
	type testCase struct {
		name string
		db   func() testDB
	}
	var cases []testCase
	for _, l := range layouts(t) {
		cases = append(cases, testCase{l.name, func() testDB { return l.db }})
	}
	cases = append(cases, testCase{"reserved networks", func() testDB { return buildReservedDB(t) }})
	for _, size := range []int{24, 28, 32} {
		cases = append(cases,
			testCase{fmt.Sprint("IPv6, aliased, ", size), func() testDB {
				return buildRandomDB(t, opts("Random-City", 6, size), randomNetworks(rng, nNets, false))
			}},
			testCase{fmt.Sprint("IPv4-only, ", size), func() testDB {
				return buildRandomDB(t, opts("Random-City", 4, size), randomNetworks(rng, nNets, true))
			}},
			testCase{fmt.Sprint("IPv6, not aliased, ", size), func() testDB {
				o := opts("Random-Country", 6, size)
				o.DisableIPv4Aliasing = true
				return buildRandomDB(t, o, append(randomNetworks(rng, nNets, false), inAliases...))
			}},
			testCase{fmt.Sprint("IPv6, aliased, reserved networks, ", size), func() testDB {
				o := opts("Random-Country", 6, size)
				o.IncludeReservedNetworks = true
				return buildRandomDB(t, o, randomNetworks(rng, nNets, false))
			}},
		)
	}
	cases = append(cases,
		testCase{"IPv6, not aliased, reserved networks", func() testDB {
			o := opts("Random-Country", 6, 28)
			o.DisableIPv4Aliasing = true
			o.IncludeReservedNetworks = true
			return buildRandomDB(t, o, append(randomNetworks(rng, nNets, false), inAliases...))
		}},
		// The IPv4 networks inside a larger network, ::/64: maxminddb
		// finds every IPv4 address there, and Networks skips every other
		// network of the same record as if it were an alias.
		testCase{"IPv4 in ::/64", func() testDB {
			o := opts("Internal-Country", 6, 24)
			o.DisableIPv4Aliasing = true
			o.IncludeReservedNetworks = true
			return buildDBOptions(t, o, []network{
				{"::/64", countryRecord(europe, russia)},
				{"2a02:6b8::/32", countryRecord(europe, russia)},
				{"2001:4860::/32", countryRecord(northAmerica, usa)},
				{"2a02:6b8:1::/48", countryRecord(northAmerica, usa)},
			})
		}},
		testCase{"large", func() testDB {
			return buildRandomDB(t, opts("Random-City", 6, 28), randomNetworks(rng, nLarge, false))
		}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := nAddrs
			if c.name == "large" {
				n = nLargeAddrs
			}
			checkEquivalent(t, c.db(), n)
		})
	}
}
