package geo

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/maxmind/mmdbwriter"
	"github.com/oschwald/maxminddb-golang/v2"
)

// layouts are the databases Country is tested against.
func layouts(tb testing.TB) []struct {
	name string
	db   testDB
	v4   bool // IPv4-only
} {
	return []struct {
		name string
		db   testDB
		v4   bool
	}{
		{"GeoLite2-Country", buildDB(tb, "GeoLite2-Country", 6, 24, countryNetworks()), false},
		{"GeoIP2-City", buildDB(tb, "GeoIP2-City", 6, 28, cityNetworks()), false},
		{"DBIP-Country-Lite", buildDB(tb, "DBIP-Country-Lite", 6, 32, countryNetworks()), false},
		{"IPv4-only City", buildDB(tb, "GeoLite2-City", 4, 24, v4Networks(cityNetworks())), true},
	}
}

func openDB(tb testing.TB, path string) *DB {
	tb.Helper()
	db, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

func TestCountry(t *testing.T) {
	for _, l := range layouts(t) {
		db := openDB(t, l.db.path)
		for i, tc := range []struct {
			addr string
			want string // "" for ok=false
			v6   bool   // an IPv6 address: not found in an IPv4-only database
		}{
			// IPv4
			{"5.255.1.2", "RU", false},
			{"8.8.8.8", "US", false},
			{"81.2.69.160", "GB", false},
			{"89.160.20.1", "SE", false},
			{"175.16.199.7", "CN", false}, // stored as "cn"
			// IPv6
			{"2a02:6b8::1", "RU", true},
			{"2001:4860:4860::8888", "US", true},
			{"2a02:cf47:ffff::1", "SE", true},
			{"2001:4860::1%eth0", "US", true}, // the zone is ignored
			// IPv4-mapped IPv6: the IPv4 address's country, in every layout
			{"::ffff:5.255.1.2", "RU", false},
			{"::ffff:8.8.8.8", "US", false},
			{"::ffff:10.0.0.1", "", false},
			// 6to4 (2002::/16) holds an IPv4 address that the IPv6
			// databases map to the IPv4 networks
			{"2002:0808:0808::1", "US", true},
			// private, loopback, link-local, unspecified and other reserved
			{"10.0.0.1", "", false},
			{"172.16.5.4", "", false},
			{"192.168.1.1", "", false},
			{"100.64.0.1", "", false},
			{"127.0.0.1", "", false},
			{"169.254.1.1", "", false},
			{"0.0.0.0", "", false},
			{"255.255.255.255", "", false},
			{"::1", "", true},
			{"::", "", true},
			{"fc00::1", "", true},
			{"fe80::1%eth0", "", true},
			{"ff02::1", "", true},
			// public, outside every network of the database
			{"9.9.9.9", "", false},
			{"5.254.255.255", "", false},
			{"2600::1", "", true},
			{"2a02:6b9::1", "", true},
			// records that name no usable country
			{"1.0.0.1", "", false},     // registered country only
			{"67.43.156.1", "", false}, // no iso_code
			{"217.65.48.1", "", false}, // "RUS"
			{"217.65.49.1", "", false}, // "R1"
			{"217.65.50.1", "", false}, // a number
			{"217.65.51.1", "", false}, // country is a string
			{"217.65.52.1", "", false}, // empty record
		} {
			addr := netip.MustParseAddr(tc.addr)
			want := tc.want
			if l.v4 && tc.v6 {
				want = ""
			}
			code, ok := db.Country(addr)
			if code != want || ok != (want != "") {
				t.Errorf("%s: Test %d: Country(%s) = %q, %v; want %q, %v",
					l.name, i, tc.addr, code, ok, want, want != "")
			}
		}
	}
}

func TestCountryInvalidAddr(t *testing.T) {
	db := openDB(t, buildDB(t, "GeoLite2-Country", 6, 24, countryNetworks()).path)
	if code, ok := db.Country(netip.Addr{}); ok || code != "" {
		t.Errorf("Country(invalid) = %q, %v; want \"\", false", code, ok)
	}
}

// A database that maps reserved networks, as some made in-house for
// internal networks do, is honoured: Country follows the database.
func TestCountryCustomPrivateNetworks(t *testing.T) {
	db := openDB(t, buildReservedDB(t).path)
	for _, tc := range []struct{ addr, want string }{
		{"10.1.2.3", "DE"},
		{"192.168.1.1", ""},
		{"fd00::1", "FR"},
	} {
		code, ok := db.Country(netip.MustParseAddr(tc.addr))
		if code != tc.want || ok != (tc.want != "") {
			t.Errorf("Country(%s) = %q, %v; want %q", tc.addr, code, ok, tc.want)
		}
	}
}

// sameString reports whether a and b share their bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// The codes are the shared strings of the table, not copies.
func TestCountryInterned(t *testing.T) {
	db := openDB(t, buildDB(t, "GeoIP2-City", 6, 28, cityNetworks()).path)
	a, _ := db.Country(netip.MustParseAddr("5.255.1.2"))
	b, _ := db.Country(netip.MustParseAddr("2a02:6b8::1"))
	if a != "RU" || !sameString(a, codeStrings[stringIndex("RU")]) || !sameString(a, b) {
		t.Errorf("Country returned %q and %q, not the interned \"RU\"", a, b)
	}
}

func TestCountryAllocs(t *testing.T) {
	db := openDB(t, buildDB(t, "GeoIP2-City", 6, 28, cityNetworks()).path)
	for _, s := range []string{
		"5.255.1.2", "2001:4860::1", "::ffff:8.8.8.8", "2002:808:808::1", "9.9.9.9", "10.0.0.1",
		"217.65.48.1", "217.65.50.1", "fe80::1%eth0",
	} {
		addr := netip.MustParseAddr(s)
		if n := testing.AllocsPerRun(100, func() { db.Country(addr) }); n != 0 {
			t.Errorf("Country(%s): %v allocations; want 0", s, n)
		}
	}
}

func TestCountryConcurrent(t *testing.T) {
	db := openDB(t, buildDB(t, "GeoIP2-City", 6, 28, cityNetworks()).path)
	addrs := []netip.Addr{
		netip.MustParseAddr("5.255.1.2"), netip.MustParseAddr("2001:4860::1"),
		netip.MustParseAddr("81.2.69.1"), netip.MustParseAddr("10.0.0.1"),
	}
	want := []string{"RU", "US", "GB", ""}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (g + i) % len(addrs)
				if code, _ := db.Country(addrs[k]); code != want[k] {
					t.Errorf("Country(%s) = %q; want %q", addrs[k], code, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	real := buildDB(t, "GeoLite2-Country", 6, 28, countryNetworks()).data
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i>>3) // fixed, so failures repeat
	}
	// The search tree and data section garbled, the metadata intact.
	garbled := append([]byte(nil), real...)
	for i := 0; i < len(garbled)/2; i++ {
		garbled[i] ^= 0x5a
	}
	for i, tc := range []struct {
		path string
		want string // in the error
		is   error  // errors.Is, if set
	}{
		{filepath.Join(dir, "missing.mmdb"), "no such file", fs.ErrNotExist},
		{dir, "not a regular file", nil},
		{write("empty.mmdb", nil), "file is empty", nil},
		{write("random.mmdb", random), "not a valid MaxMind database", nil},
		{write("text.mmdb", []byte("GeoLite2-Country\n")), "not a valid MaxMind database", nil},
		{write("half.mmdb", real[:len(real)/2]), "not a valid MaxMind database", nil},
		{write("tail.mmdb", real[:len(real)-20]), "not a valid MaxMind database", nil},
		{write("garbled.mmdb", garbled), "corrupt", nil},
		{buildDB(t, "GeoLite2-ASN", 6, 24, asnNetworks()).path, `database type "GeoLite2-ASN" has no country data`, nil},
		{buildDB(t, "GeoLite2-Country", 6, 24, nil).path, "has no country data", nil},
	} {
		db, err := Open(tc.path)
		if err == nil {
			db.Close()
			t.Errorf("Test %d: Open(%s) succeeded; want an error", i, tc.path)
			continue
		}
		t.Logf("Test %d: %v", i, err)
		msg := err.Error()
		if !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.want) {
			t.Errorf("Test %d: error %q; want it to name the path and say %q", i, msg, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("Test %d: error %q is not %v", i, msg, tc.is)
		}
	}
}

func TestOpenUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	path := buildDB(t, "GeoLite2-Country", 6, 24, countryNetworks()).path
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Open(unreadable) = %v; want a permission error naming the path", err)
	}
}

func TestCloseTwice(t *testing.T) {
	db, err := Open(buildDB(t, "GeoLite2-Country", 6, 24, countryNetworks()).path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Close frees nothing that Country needs.
	if code, _ := db.Country(netip.MustParseAddr("8.8.8.8")); code != "US" {
		t.Errorf("Country after Close = %q; want US", code)
	}
}

// Open reads the whole database: the file may then be rewritten in place,
// truncated or removed without harm, where a memory-mapped file would
// crash the process (SIGBUS) on the next lookup.
func TestFileRewritten(t *testing.T) {
	path := buildDB(t, "GeoIP2-City", 6, 28, cityNetworks()).path
	db := openDB(t, path)
	for _, change := range []func() error{
		func() error { return os.Truncate(path, 0) },
		func() error { return os.WriteFile(path, []byte("not a database"), 0o644) },
		func() error { return os.Remove(path) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ addr, want string }{
			{"5.255.1.2", "RU"}, {"2001:4860::1", "US"}, {"2002:808:808::1", "US"}, {"9.9.9.9", ""},
		} {
			if code, _ := db.Country(netip.MustParseAddr(tc.addr)); code != tc.want {
				t.Errorf("Country(%s) = %q; want %q", tc.addr, code, tc.want)
			}
		}
	}
}

func TestInfo(t *testing.T) {
	for _, l := range layouts(t) {
		info := openDB(t, l.db.path).Info()
		t.Logf("%s: %+v", l.name, info)
		if want := strings.TrimSuffix(filepath.Base(l.db.path), ".mmdb"); info.DatabaseType != want {
			t.Errorf("%s: DatabaseType %q; want %q", l.name, info.DatabaseType, want)
		}
		if !info.BuildTime.Equal(time.Unix(1_700_000_000, 0)) {
			t.Errorf("%s: BuildTime %v; want %v", l.name, info.BuildTime, time.Unix(1_700_000_000, 0))
		}
		// Five countries, each between two ranges of none: the networks
		// without a usable code merge with their neighbours.
		if info.IPv4Ranges != 11 {
			t.Errorf("%s: %d IPv4 ranges; want 11", l.name, info.IPv4Ranges)
		}
		if l.v4 != (info.IPv6Ranges == 0) {
			t.Errorf("%s: %d IPv6 ranges", l.name, info.IPv6Ranges)
		}
		// The tables' buckets take 8 bytes each for IPv4 and 12 for IPv6,
		// however few the ranges.
		want := 8 << bucketBits4
		if !l.v4 {
			want += 12 << bucketBits6
		}
		if info.TableBytes < want || info.TableBytes > want+1<<10 {
			t.Errorf("%s: %d table bytes for %d + %d ranges; want about %d",
				l.name, info.TableBytes, info.IPv4Ranges, info.IPv6Ranges, want)
		}
	}
}

// A search tree whose nodes share their subtrees holds far more networks
// than nodes (here 2^100): Open refuses it rather than walk them all.
func TestOpenSharedSubtrees(t *testing.T) {
	tdb := buildDBOptions(t, mmdbwriter.Options{
		DatabaseType:            "GeoLite2-Country",
		Description:             map[string]string{"en": "shared subtrees"},
		RecordSize:              24,
		DisableIPv4Aliasing:     true,
		IncludeReservedNetworks: true,
	}, []network{{"2a02::/100", countryRecord(europe, russia)}})
	r, err := maxminddb.Open(tdb.path)
	if err != nil {
		t.Fatal(err)
	}
	nodes := int(r.Metadata.NodeCount)
	r.Close()
	// Node i leads to node i+1 both ways; the last one to the record at
	// the start of the data section.
	data := slices.Clone(tdb.data)
	for i := range nodes {
		next := i + 1
		if next == nodes {
			next = nodes + 16
		}
		for _, at := range []int{6 * i, 6*i + 3} {
			data[at], data[at+1], data[at+2] = byte(next>>16), byte(next>>8), byte(next)
		}
	}
	path := filepath.Join(t.TempDir(), "shared.mmdb")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := maxminddb.Open(path); err != nil || r.Verify() != nil {
		t.Fatalf("the crafted database does not pass maxminddb's checks: %v", err)
	}
	db, err := Open(path)
	if err == nil {
		t.Fatalf("Open succeeded: %+v", db.Info())
	}
	if !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("error %q; want it to say corrupt", err)
	}
}
