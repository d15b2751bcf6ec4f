package geo

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// The large databases of the benchmarks, as real ones are laid out:
// networks of many sizes, one after another with gaps, IPv6 ones in the
// regional registries' blocks.

// v6Blocks are the blocks where the regional registries allocate IPv6
// networks.
var v6Blocks = []netip.Prefix{
	netip.MustParsePrefix("2001:200::/23"), netip.MustParsePrefix("2400::/12"),
	netip.MustParsePrefix("2600::/12"), netip.MustParsePrefix("2800::/12"),
	netip.MustParsePrefix("2a00::/12"), netip.MustParsePrefix("2c00::/12"),
}

// layoutNetworks returns about n4 IPv4 networks of /shortest4 to /24 and
// n6 IPv6 networks of /shortest6 to /48, smaller ones more often, in
// address order, each with record(i) for a random i. Nothing is in a
// reserved network.
func layoutNetworks(rng *rand.Rand, n4, shortest4, n6, shortest6 int, record func(rng *rand.Rand) mmdbtype.Map) []network {
	// length returns a prefix length from shortest to longest, each
	// shorter one about half as likely as the next.
	length := func(shortest, longest int) int {
		n := longest - min(bits.LeadingZeros64(rng.Uint64()|1), longest-shortest)
		return n
	}
	var nets []network
	// IPv4: from 1.0.0.0 to 223.255.255.255, the space spread so that n4
	// networks fill it.
	reserved := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.0.0.0/16"),
		netip.MustParsePrefix("192.88.99.0/24"), netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"),
	}
	cursor := uint64(1 << 24)
	const end4 = 224 << 24
	for cursor < end4 && len(nets) < n4 {
		l := length(shortest4, 24)
		size := uint64(1) << (32 - l)
		cursor = (cursor + size - 1) &^ (size - 1)
		if cursor+size > end4 {
			break
		}
		a := netip.AddrFrom4([4]byte{byte(cursor >> 24), byte(cursor >> 16), byte(cursor >> 8), byte(cursor)})
		p := netip.PrefixFrom(a, l)
		ok := true
		for _, r := range reserved {
			ok = ok && !r.Overlaps(p)
		}
		if ok {
			nets = append(nets, network{p.String(), record(rng)})
		}
		cursor += size
		cursor += gap(rng, end4-cursor, n4-len(nets))
	}
	// IPv6: the first 64 bits, in each block in turn.
	perBlock := (n6 + len(v6Blocks) - 1) / len(v6Blocks)
	for _, blk := range v6Blocks {
		n := 0
		b := blk.Addr().As16()
		cursor := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32
		end := cursor + 1<<(64-blk.Bits())
		for ; n < perBlock && cursor < end; n++ {
			l := length(shortest6, 48)
			size := uint64(1) << (64 - l)
			cursor = (cursor + size - 1) &^ (size - 1)
			if cursor+size > end {
				break
			}
			var a [16]byte
			for i := range 8 {
				a[i] = byte(cursor >> (56 - 8*i))
			}
			nets = append(nets, network{netip.PrefixFrom(netip.AddrFrom16(a), l).String(), record(rng)})
			cursor += size
			cursor += gap(rng, end-cursor, perBlock-n)
		}
	}
	return nets
}

// gap returns a random gap to leave after a network, so that n more
// networks spread over the rest of the space, left addresses: none after
// half of them, a random one of up to twice the mean space per network
// after the others.
func gap(rng *rand.Rand, left uint64, n int) uint64 {
	if n <= 1 || rng.IntN(2) == 0 {
		return 0
	}
	mean := left / uint64(n)
	return rng.Uint64N(2*mean + 1)
}

// writeNetworks writes a database of nets with mmdbwriter.
func writeNetworks(tb testing.TB, dbType string, nets []network) testDB {
	tb.Helper()
	return buildDBOptions(tb, mmdbwriter.Options{
		DatabaseType: dbType,
		Description:  map[string]string{"en": "edgelimit benchmark database"},
		RecordSize:   28,
	}, nets)
}

// countrySizedDB builds a database the size of a Country one: about
// 300,000 IPv4 networks of /12 to /24 and 150,000 IPv6 ones of /19 to /48,
// over 250 country records, and returns it with 65,536 random addresses
// of each family inside its networks.
func countrySizedDB(b *testing.B) (*DB, map[string][]netip.Addr) {
	b.Helper()
	rng := rand.New(rand.NewPCG(9, 10))
	var records []mmdbtype.Map
	for i, code := range countryCodes(250) {
		records = append(records, countryRecord(europe, place(code, uint32(i), "Country", "Land")))
	}
	nets := layoutNetworks(rng, 300_000, 12, 150_000, 19, func(rng *rand.Rand) mmdbtype.Map {
		return records[rng.IntN(len(records))]
	})
	db := openDB(b, writeNetworks(b, "GeoLite2-Country", nets).path)
	addrs := randomAddrs(rng, nets, 1<<17)
	runtime.GC()
	return db, addrs
}

// BenchmarkOpen opens a City-like database of about 1,000,000 networks
// (600,000 IPv4, 400,000 IPv6) and 100,000 records over 250 countries,
// and reports the size of the tables Open makes (table-bytes) and how many
// ranges they hold. B/op is what Open allocates in all, the tables
// included.
func BenchmarkOpen(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	codes := countryCodes(250)
	records := make([]mmdbtype.Map, 100_000)
	for i := range records {
		c := place(codes[i%len(codes)], uint32(i), "Country", "Land")
		records[i] = cityRecord(europe, c, fmt.Sprint("City ", i), float64(i%90), float64(i%180))
	}
	nets := layoutNetworks(rng, 600_000, 16, 400_000, 24, func(rng *rand.Rand) mmdbtype.Map {
		return records[rng.IntN(len(records))]
	})
	tdb := writeNetworks(b, "GeoIP2-City", nets)
	b.Logf("%d networks, %d MB", len(nets), len(tdb.data)>>20)
	tdb.tree, tdb.data = nil, nil
	runtime.GC()
	var info Info
	b.ReportAllocs()
	for b.Loop() {
		db, err := Open(tdb.path)
		if err != nil {
			b.Fatal(err)
		}
		info = db.Info()
	}
	b.ReportMetric(float64(info.TableBytes), "table-bytes")
	b.ReportMetric(float64(info.IPv4Ranges+info.IPv6Ranges), "ranges")
}
