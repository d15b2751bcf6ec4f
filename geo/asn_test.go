package geo

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

func openASN(tb testing.TB, path string) *ASNDB {
	tb.Helper()
	db, err := OpenASN(path)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// asnRecordOf is a record of an ASN database.
func asnRecordOf(n uint32, org string) mmdbtype.Map {
	return mmdbtype.Map{
		"autonomous_system_number":       mmdbtype.Uint32(n),
		"autonomous_system_organization": mmdbtype.String(org),
	}
}

func TestASNLookup(t *testing.T) {
	nets := append(asnNetworks(),
		network{"5.255.255.0/24", asnRecordOf(13238, "YANDEX LLC")}, // a second record of one system
		network{"198.51.200.0/24", mmdbtype.Map{"autonomous_system_organization": mmdbtype.String("no number")}},
	)
	for _, layout := range []struct {
		version, recordSize int
	}{{6, 24}, {6, 28}, {6, 32}, {4, 24}} {
		var v4 []network
		if layout.version == 4 {
			v4 = v4Networks(nets)
		} else {
			v4 = nets
		}
		tdb := buildDB(t, "GeoLite2-ASN", layout.version, layout.recordSize, v4)
		db := openASN(t, tdb.path)
		for i, tc := range []struct {
			addr string
			want string // "AS123 ORG"; "" unknown
		}{
			{"8.8.8.8", "AS15169 GOOGLE"},
			{"8.8.8.255", "AS15169 GOOGLE"},
			{"8.8.9.1", ""},
			{"5.255.1.2", "AS13238 YANDEX LLC"},
			{"5.255.255.9", "AS13238 YANDEX LLC"},
			{"::ffff:8.8.8.8", "AS15169 GOOGLE"},
			{"2001:4860::1", "AS15169 GOOGLE"},
			{"2001:4860:ffff::1%eth0", "AS15169 GOOGLE"},
			{"2002:808:808::1", "AS15169 GOOGLE"}, // 6to4: the IPv4 networks' alias
			{"2001:4861::1", ""},
			{"198.51.200.7", ""}, // a record without a number
			{"10.0.0.1", ""},
			{"::1", ""},
		} {
			addr := netip.MustParseAddr(tc.addr)
			if layout.version == 4 && addr.Unmap().Is6() {
				tc.want = ""
			}
			got := ""
			if as, ok := db.Lookup(addr); ok {
				got = as.Key + " " + as.Org
			}
			if got != tc.want {
				t.Errorf("Test %d (IPv%d, %d bits): Lookup(%s) = %q; want %q", i, layout.version, layout.recordSize, tc.addr, got, tc.want)
			}
		}
		if _, ok := db.Lookup(netip.Addr{}); ok {
			t.Errorf("IPv%d: Lookup of the zero Addr found an AS", layout.version)
		}
	}
}

// TestASNShared: the addresses of one system share one AS, which System
// finds by number; Info counts the systems.
func TestASNShared(t *testing.T) {
	nets := append(asnNetworks(), network{"5.255.255.0/24", asnRecordOf(13238, "YANDEX LLC")})
	db := openASN(t, buildDB(t, "GeoLite2-ASN", 6, 24, nets).path)
	a, _ := db.Lookup(netip.MustParseAddr("5.255.1.1"))
	b, _ := db.Lookup(netip.MustParseAddr("5.255.255.1"))
	c, _ := db.System(13238)
	if a == nil || a != b || a != c || a.String() != "AS13238" {
		t.Errorf("Lookup and System gave %p, %p, %p; want one AS13238", a, b, c)
	}
	if _, ok := db.System(64512); ok {
		t.Error("System(64512) found an AS the database does not name")
	}
	info := db.Info()
	if info.DatabaseType != "GeoLite2-ASN" || info.Systems != 2 || info.Bytes == 0 || info.BuildTime.Unix() != 1_700_000_000 {
		t.Errorf("Info() = %+v; want GeoLite2-ASN, 2 systems, its bytes, built at 1700000000", info)
	}
}

func TestASNLookupAllocs(t *testing.T) {
	db := openASN(t, buildDB(t, "GeoLite2-ASN", 6, 28, asnNetworks()).path)
	for _, s := range []string{"8.8.8.8", "2001:4860::1", "::ffff:8.8.8.8", "2002:808:808::1", "9.9.9.9", "fe80::1%eth0"} {
		addr := netip.MustParseAddr(s)
		if n := testing.AllocsPerRun(100, func() { db.Lookup(addr) }); n != 0 {
			t.Errorf("Lookup(%s): %v allocations; want 0", s, n)
		}
	}
}

// TestOpenASNErrors: what is not an ASN database is refused, naming the
// path, by OpenASN and by CheckASN; a country database too.
func TestOpenASNErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.mmdb")
	if err := os.WriteFile(text, []byte("GeoLite2-ASN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		path string
		want string
	}{
		{filepath.Join(dir, "missing.mmdb"), "no such file"},
		{dir, "not a regular file"},
		{text, "not a valid MaxMind database"},
		{buildDB(t, "GeoLite2-Country", 6, 24, countryNetworks()).path, `database type "GeoLite2-Country" has no autonomous system numbers`},
		{buildDB(t, "GeoLite2-ASN", 6, 24, nil).path, "has no autonomous system numbers"},
	} {
		_, err := OpenASN(tc.path)
		for fn, err := range map[string]error{"OpenASN": err, "CheckASN": CheckASN(tc.path)} {
			if err == nil || !strings.Contains(err.Error(), `loading ASN database "`+tc.path+`"`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Test %d: %s(%s) = %v; want an error naming the path and saying %q", i, fn, tc.path, err, tc.want)
			}
		}
	}
	if err := CheckASN(buildDB(t, "GeoLite2-ASN", 6, 24, asnNetworks()).path); err != nil {
		t.Errorf("CheckASN of an ASN database: %v", err)
	}
}

// TestASNFileRewritten: the database keeps nothing of the file.
func TestASNFileRewritten(t *testing.T) {
	tdb := buildDB(t, "GeoLite2-ASN", 6, 24, asnNetworks())
	db := openASN(t, tdb.path)
	if err := os.WriteFile(tdb.path, make([]byte, len(tdb.data)), 0o644); err != nil {
		t.Fatal(err)
	}
	if as, ok := db.Lookup(netip.MustParseAddr("8.8.8.8")); !ok || as.Key != "AS15169" {
		t.Errorf("after the file was zeroed, Lookup(8.8.8.8) = %v, %v; want AS15169", as, ok)
	}
}

func TestParseASNMultipliers(t *testing.T) {
	for i, tc := range []struct {
		args string
		want map[string]float64 // nil: want an error
		err  string
	}{
		{"AS15169 0.5 16509 2 default 1", map[string]float64{"AS15169": 0.5, "AS16509": 2, "default": 1}, ""},
		{"as13238 0 DEFAULT 0.5", map[string]float64{"AS13238": 0, "default": 0.5}, ""},
		{"4294967295 1", map[string]float64{"AS4294967295": 1}, ""},
		{"", nil, "expected AS numbers and factors"},
		{"AS15169", nil, `argument 1 "AS15169": no factor follows`},
		{"AS0 1", nil, `argument 1 "AS0": not an AS number`},
		{"4294967296 1", nil, `argument 1 "4294967296": not an AS number`},
		{"AS 1", nil, `argument 1 "AS": not an AS number`},
		{"ASN15169 1", nil, `argument 1 "ASN15169": not an AS number`},
		{"+15169 1", nil, `argument 1 "+15169": not an AS number`},
		{"AS+15169 1", nil, `argument 1 "AS+15169": not an AS number`},
		{"RU 1", nil, `argument 1 "RU": not an AS number`},
		{"AS15169 -1", nil, `argument 2 "-1" (factor for AS15169): factor is negative`},
		{"AS15169 1 15169 2", nil, `argument 3 "15169": AS15169 given twice`},
		{"default 1 default 2", nil, `argument 3 "default": default given twice`},
	} {
		m, err := ParseASNMultipliers(strings.Fields(tc.args))
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Test %d: ParseASNMultipliers(%q) = %v, %v; want an error with %q", i, tc.args, m, err, tc.err)
			}
			continue
		}
		if err != nil || !maps.Equal(m.Map(), tc.want) {
			t.Errorf("Test %d: ParseASNMultipliers(%q) = %v, %v; want %v", i, tc.args, m.Map(), err, tc.want)
			continue
		}
		again, err := ASNMultipliersFromMap(m.Map())
		if err != nil || again.String() != m.String() {
			t.Errorf("Test %d: FromMap(Map()) = %q, %v; want %q", i, again.String(), err, m.String())
		}
	}
	if _, err := ASNMultipliersFromMap(map[string]float64{"AS15169": 1, "15169": 2}); err == nil || !strings.Contains(err.Error(), "AS15169 given twice") {
		t.Errorf("FromMap with 15169 twice: %v; want AS15169 given twice", err)
	}
}

func TestASNMultipliersFor(t *testing.T) {
	m, err := ParseASNMultipliers(strings.Fields("AS15169 0.5 AS13238 0 default 2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "AS13238 0 AS15169 0.5 default 2" {
		t.Errorf("String() = %q", got)
	}
	google, yandex, other := &AS{Number: 15169}, &AS{Number: 13238}, &AS{Number: 64512}
	for i, tc := range []struct {
		as   *AS
		ok   bool
		want float64
	}{{google, true, 0.5}, {yandex, true, 0}, {other, true, 2}, {nil, false, 2}, {google, false, 2}} {
		if got := m.For(tc.as, tc.ok); got != tc.want {
			t.Errorf("Test %d: For(%v, %v) = %v; want %v", i, tc.as, tc.ok, got, tc.want)
		}
	}
	if got := (ASNMultipliers{}).For(google, true); got != 1 {
		t.Errorf("zero For = %v; want 1", got)
	}
	if n := testing.AllocsPerRun(100, func() { m.For(google, true) }); n != 0 {
		t.Errorf("For: %v allocations; want 0", n)
	}
}

// TestASNEquivalent: Lookup answers as maxminddb does on the same file,
// in each layout: IPv6 with and without aliases of the IPv4 networks,
// IPv4-only, reserved networks, and a large database.
func TestASNEquivalent(t *testing.T) {
	nLarge, nNets, nLargeAddrs, nAddrs := equivSizes()
	rng := rand.New(rand.NewPCG(5, 6))
	opts := func(ipVersion, recordSize int, aliased, reserved bool) mmdbwriter.Options {
		return mmdbwriter.Options{
			DatabaseType:            "Random-ASN",
			Description:             map[string]string{"en": "edgelimit test database"},
			IPVersion:               ipVersion,
			RecordSize:              recordSize,
			DisableIPv4Aliasing:     !aliased,
			IncludeReservedNetworks: reserved,
		}
	}
	records := make([]mmdbtype.Map, 40)
	for i := range records {
		records[i] = asnRecordOf(uint32(1000+i), fmt.Sprint("ORG ", i))
	}
	records = append(records, mmdbtype.Map{"autonomous_system_organization": mmdbtype.String("no number")})
	asnNets := func(n int, v4only bool) []network {
		nets := randomNetworks(rng, n, v4only)
		for i := range nets {
			nets[i].record = records[rng.IntN(len(records))]
		}
		return nets
	}
	for _, c := range []struct {
		name  string
		opts  mmdbwriter.Options
		nets  int
		addrs int
	}{
		{"IPv6, aliased", opts(6, 24, true, false), nNets, nAddrs},
		{"IPv6, not aliased", opts(6, 28, false, false), nNets, nAddrs},
		{"IPv4-only", opts(4, 32, true, false), nNets, nAddrs},
		{"IPv6, reserved networks", opts(6, 28, true, true), nNets, nAddrs},
		{"large", opts(6, 28, true, false), nLarge, nLargeAddrs},
	} {
		t.Run(c.name, func(t *testing.T) {
			tdb := buildRandomDB(t, c.opts, asnNets(c.nets, c.opts.IPVersion == 4))
			db := openASN(t, tdb.path)
			ref := newReference(t, tdb.path)
			got := func(addr netip.Addr) string {
				if as, ok := db.Lookup(addr); ok {
					return as.Key
				}
				return ""
			}
			want := func(addr netip.Addr) string {
				addr = addr.Unmap()
				if !addr.IsValid() || c.opts.IPVersion == 4 && addr.Is6() {
					return ""
				}
				var n uint32
				if ref.r.Lookup(addr).DecodePath(&n, "autonomous_system_number") != nil || n == 0 {
					return ""
				}
				return fmt.Sprint("AS", n)
			}
			checkLookups(t, "Lookup", tdb, c.addrs, got, want)
		})
	}
}
