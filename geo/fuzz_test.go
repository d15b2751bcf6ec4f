package geo

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// fuzzAddrs are looked up in every database that FuzzOpen manages to open.
var fuzzAddrs = []netip.Addr{
	netip.MustParseAddr("5.255.1.2"),
	netip.MustParseAddr("8.8.8.8"),
	netip.MustParseAddr("0.0.0.0"),
	netip.MustParseAddr("255.255.255.255"),
	netip.MustParseAddr("2a02:6b8::1"),
	netip.MustParseAddr("::ffff:8.8.8.8"),
	netip.MustParseAddr("::"),
	netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
}

// FuzzOpen writes random bytes to a file: Open, OpenASN and CheckASN never
// panic; when Open accepts them, Country never panics and returns an
// upper-case two-letter code when ok; when OpenASN does, so does CheckASN,
// and Lookup returns an AS with its number when ok.
func FuzzOpen(f *testing.F) {
	for _, db := range []testDB{
		buildDB(f, "GeoLite2-Country", 6, 24, countryNetworks()[:3]),
		buildDB(f, "GeoIP2-City", 4, 28, v4Networks(cityNetworks())[:2]),
		buildDB(f, "DBIP-Country-Lite", 6, 32, countryNetworks()[5:7]),
		buildDB(f, "GeoLite2-ASN", 6, 24, asnNetworks()),
	} {
		f.Add(db.data)
	}
	f.Add([]byte("\xab\xcd\xefMaxMind.com"))
	f.Add([]byte{})
	path := filepath.Join(f.TempDir(), "fuzz.mmdb")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		checkErr := CheckASN(path)
		if asns, err := OpenASN(path); err == nil {
			if checkErr != nil {
				t.Fatalf("OpenASN accepts what CheckASN refuses: %v", checkErr)
			}
			for _, addr := range fuzzAddrs {
				if as, ok := asns.Lookup(addr); ok != (as != nil) || ok && (as.Number == 0 || as.Key != "AS"+strconv.FormatUint(uint64(as.Number), 10)) {
					t.Fatalf("Lookup(%s) = %+v, %v", addr, as, ok)
				}
			}
		}
		db, err := Open(path)
		if err != nil {
			return
		}
		defer db.Close()
		for _, addr := range fuzzAddrs {
			if code, ok := db.Country(addr); ok != (code != "") || (ok && !sameString(code, codeStrings[stringIndex(code)])) {
				t.Fatalf("Country(%s) = %q, %v", addr, code, ok)
			}
		}
	})
}

// FuzzCountry looks up 16 random bytes, as an IPv6 address and, from its
// first 4, as an IPv4 one, in a City database, and checks the answer
// against the writer's own tree.
func FuzzCountry(f *testing.F) {
	tdb := buildDB(f, "GeoIP2-City", 6, 28, cityNetworks())
	db := openDB(f, tdb.path)
	for _, s := range []string{"::ffff:5.255.1.2", "2a02:6b8::1", "2002:808:808::1", "::1", "2001::1", "::a00:1"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 16 {
			return
		}
		v6 := netip.AddrFrom16([16]byte(b))
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		for _, addr := range []netip.Addr{v6, v4} {
			code, ok := db.Country(addr)
			want := treeCountry(tdb, addr)
			if code != want || ok != (want != "") {
				t.Fatalf("Country(%s) = %q, %v; want %q", addr, code, ok, want)
			}
		}
		if v6.Is4In6() {
			if a, b := must(db.Country(v6)), must(db.Country(v6.Unmap())); a != b {
				t.Fatalf("Country(%s) = %q but Country(%s) = %q", v6, a, v6.Unmap(), b)
			}
		}
	})
}

func must(code string, _ bool) string { return code }

// treeCountry is the reference: the country code that the writer's tree
// holds for addr, upper-cased, or "".
func treeCountry(tdb testDB, addr netip.Addr) string {
	_, rec := tdb.tree.Get(net.IP(addr.Unmap().AsSlice()))
	m, _ := rec.(mmdbtype.Map)
	country, _ := m["country"].(mmdbtype.Map)
	code, _ := country["iso_code"].(mmdbtype.String)
	i := stringIndex(string(code))
	if i < 0 {
		return ""
	}
	return codeStrings[i]
}
