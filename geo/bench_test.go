package geo

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"
)

// benchAddrs are found and not found, IPv4 and IPv6.
var benchAddrs = map[string][]netip.Addr{
	"v4": {
		netip.MustParseAddr("5.255.1.2"), netip.MustParseAddr("8.8.8.8"),
		netip.MustParseAddr("81.2.69.160"), netip.MustParseAddr("9.9.9.9"),
	},
	"v6": {
		netip.MustParseAddr("2a02:6b8::1"), netip.MustParseAddr("2001:4860:4860::8888"),
		netip.MustParseAddr("2a02:cf47::1"), netip.MustParseAddr("2600::1"),
	},
}

// BenchmarkCountry looks up addresses in a small City database, and random
// addresses inside the networks of two large ones: "large", a City
// database of 100,000 networks (IPv4 /24s and IPv6 /48s, packed) and
// 20,000 records, and "country", one the size of a Country database
// (countrySizedDB). "decode" is what Open spends on each record: decoding
// a City record's country code.
func BenchmarkCountry(b *testing.B) {
	city := buildDB(b, "GeoIP2-City", 6, 28, cityNetworks())
	db := openDB(b, city.path)
	for _, family := range []string{"v4", "v6"} {
		benchCountry(b, family, db, benchAddrs[family])
	}
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				db.Country(benchAddrs["v4"][i%4])
				i++
			}
		})
	})
	b.Run("decode", func(b *testing.B) {
		r, err := maxminddb.Open(city.path)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		res := r.Lookup(benchAddrs["v4"][0])
		b.ReportAllocs()
		for b.Loop() {
			decodeCode(res)
		}
	})
	for _, large := range []struct {
		name string
		open func(*testing.B) (*DB, map[string][]netip.Addr)
	}{{"large", largeDB}, {"country", countrySizedDB}} {
		db, addrs := large.open(b)
		for _, family := range []string{"v4", "v6"} {
			benchCountry(b, large.name+"/"+family, db, addrs[family])
		}
	}
}

func benchCountry(b *testing.B, name string, db *DB, addrs []netip.Addr) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			db.Country(addrs[i%len(addrs)])
			i++
		}
	})
}

func BenchmarkCountryAndMultiplier(b *testing.B) {
	db := openDB(b, buildDB(b, "GeoIP2-City", 6, 28, cityNetworks()).path)
	m, err := ParseMultipliers(strings.Fields("RU 1.5 US 1.0 CN 2 SE 0.8 default 0.5"))
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, db *DB, addrs []netip.Addr) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i, sum := 0, 0.0
			for b.Loop() {
				sum += m.For(db.Country(addrs[i%len(addrs)]))
				i++
			}
			_ = sum
		})
	}
	run("v4", db, benchAddrs["v4"])
	run("v6", db, benchAddrs["v6"])
	large, addrs := largeDB(b)
	run("large/v4", large, addrs["v4"])
	run("large/v6", large, addrs["v6"])
	country, addrs := countrySizedDB(b)
	run("country/v4", country, addrs["v4"])
	run("country/v6", country, addrs["v6"])
}

// largeDB builds a City database of 50,000 IPv4 /24s and 50,000 IPv6 /48s
// holding 20,000 records over 200 countries, and returns it with 4,096
// random addresses of each family inside its networks.
func largeDB(b *testing.B) (*DB, map[string][]netip.Addr) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	codes := countryCodes(200)
	records := make([]mmdbtype.Map, 20_000)
	for i := range records {
		c := place(codes[i%len(codes)], uint32(i), "Country", "Land")
		records[i] = cityRecord(europe, c, fmt.Sprint("City ", i), 0, 0)
	}
	var nets []network
	for i := range 50_000 {
		// 11.0.0.0/8 up to 62.0.0.0/8: public, and no reserved range
		v4 := netip.AddrFrom4([4]byte{byte(11 + i>>16%52), byte(i >> 8), byte(i), 0})
		v6 := netip.AddrFrom16([16]byte{0x2a, 0x00, byte(i >> 16), byte(i >> 8), byte(i)})
		nets = append(nets,
			network{v4.String() + "/24", records[rng.IntN(len(records))]},
			network{v6.String() + "/48", records[rng.IntN(len(records))]})
	}
	addrs := randomAddrs(rng, nets, 4096)
	db := openDB(b, buildDB(b, "GeoIP2-City", 6, 28, nets).path)
	runtime.GC() // the writer's garbage, not to be collected while timing
	return db, addrs
}

// countryCodes returns the first n assigned country codes.
func countryCodes(n int) []string {
	var codes []string
	for i := range numCodes {
		if assigned[i] && len(codes) < n {
			codes = append(codes, codeStrings[i])
		}
	}
	return codes
}

// randomAddrs returns n random addresses inside random networks of nets,
// by family.
func randomAddrs(rng *rand.Rand, nets []network, n int) map[string][]netip.Addr {
	addrs := map[string][]netip.Addr{}
	for range n {
		a := randomIn(rng, netip.MustParsePrefix(nets[rng.IntN(len(nets))].cidr))
		family := "v6"
		if a.Is4() {
			family = "v4"
		}
		addrs[family] = append(addrs[family], a)
	}
	return addrs
}
