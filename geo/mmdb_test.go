package geo

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// The tests build their databases with mmdbwriter, in the layouts of the
// real ones; nothing is downloaded and no binary fixture is kept.

// network is one network of a test database and its record.
type network struct {
	cidr   string
	record mmdbtype.Map
}

// testDB is a database built for a test: its file, its bytes, and the
// writer's tree, which answers lookups as a reference.
type testDB struct {
	path string
	data []byte
	tree *mmdbwriter.Tree
}

// buildDB writes a database of the given type and IP version (4 or 6) and
// record size with the networks into a temporary directory.
func buildDB(tb testing.TB, dbType string, ipVersion, recordSize int, nets []network) testDB {
	tb.Helper()
	return buildDBOptions(tb, mmdbwriter.Options{
		DatabaseType: dbType,
		Description:  map[string]string{"en": "edgelimit test database"},
		Languages:    []string{"en", "de"},
		IPVersion:    ipVersion,
		RecordSize:   recordSize,
		BuildEpoch:   1_700_000_000,
	}, nets)
}

// buildReservedDB is a database made in-house that maps private networks.
func buildReservedDB(tb testing.TB) testDB {
	tb.Helper()
	return buildDBOptions(tb, mmdbwriter.Options{
		DatabaseType:            "Internal-Country",
		Description:             map[string]string{"en": "internal networks"},
		IncludeReservedNetworks: true,
	}, []network{
		{"10.0.0.0/8", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("DE")}}},
		{"fd00::/8", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("FR")}}},
	})
}

// buildDBOptions writes a database made with opts.
func buildDBOptions(tb testing.TB, opts mmdbwriter.Options, nets []network) testDB {
	tb.Helper()
	return buildTree(tb, opts, nets, true)
}

// buildTree writes a database of nets made with opts. Unless strict, the
// networks that the writer refuses (reserved or aliased ones) are left out.
func buildTree(tb testing.TB, opts mmdbwriter.Options, nets []network, strict bool) testDB {
	tb.Helper()
	tree, err := mmdbwriter.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range nets {
		_, ipnet, err := net.ParseCIDR(n.cidr)
		if err != nil {
			tb.Fatal(err)
		}
		if err := tree.Insert(ipnet, n.record); err != nil && strict {
			tb.Fatalf("inserting %s: %v", n.cidr, err)
		}
	}
	return writeTree(tb, opts.DatabaseType, tree)
}

// writeTree writes a database made with mmdbwriter into a temporary
// directory.
func writeTree(tb testing.TB, dbType string, tree *mmdbwriter.Tree) testDB {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), dbType+".mmdb")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return testDB{path: path, data: buf.Bytes(), tree: tree}
}

// names is a localized names map.
func names(en, de string) mmdbtype.Map {
	return mmdbtype.Map{"en": mmdbtype.String(en), "de": mmdbtype.String(de)}
}

// place is a country or continent as the GeoIP2 databases store it.
func place(code string, geonameID uint32, en, de string) mmdbtype.Map {
	return mmdbtype.Map{
		"geoname_id": mmdbtype.Uint32(geonameID),
		"iso_code":   mmdbtype.String(code),
		"names":      names(en, de),
	}
}

var (
	europe       = mmdbtype.Map{"code": mmdbtype.String("EU"), "geoname_id": mmdbtype.Uint32(6255148), "names": names("Europe", "Europa")}
	northAmerica = mmdbtype.Map{"code": mmdbtype.String("NA"), "geoname_id": mmdbtype.Uint32(6255149), "names": names("North America", "Nordamerika")}
	asia         = mmdbtype.Map{"code": mmdbtype.String("AS"), "geoname_id": mmdbtype.Uint32(6255147), "names": names("Asia", "Asien")}
	oceania      = mmdbtype.Map{"code": mmdbtype.String("OC"), "geoname_id": mmdbtype.Uint32(6255151), "names": names("Oceania", "Ozeanien")}

	russia  = place("RU", 2017370, "Russia", "Russland")
	usa     = place("US", 6252001, "United States", "USA")
	britain = place("GB", 2635167, "United Kingdom", "Vereinigtes Königreich")
	sweden  = place("SE", 2661886, "Sweden", "Schweden")
	china   = place("cn", 1814991, "China", "China") // lower case: Country upper-cases it
	aussie  = place("AU", 2077456, "Australia", "Australien")
)

// countryRecord is a record in the GeoLite2-Country layout.
func countryRecord(continent, country mmdbtype.Map) mmdbtype.Map {
	return mmdbtype.Map{
		"continent":          continent,
		"country":            country,
		"registered_country": country,
	}
}

// cityRecord is a record in the GeoIP2-City layout.
func cityRecord(continent, country mmdbtype.Map, city string, lat, lon float64) mmdbtype.Map {
	r := countryRecord(continent, country)
	r["city"] = mmdbtype.Map{"geoname_id": mmdbtype.Uint32(1), "names": names(city, city)}
	r["location"] = mmdbtype.Map{
		"accuracy_radius": mmdbtype.Uint16(100),
		"latitude":        mmdbtype.Float64(lat),
		"longitude":       mmdbtype.Float64(lon),
		"time_zone":       mmdbtype.String("Etc/UTC"),
	}
	r["postal"] = mmdbtype.Map{"code": mmdbtype.String("12345")}
	r["subdivisions"] = mmdbtype.Slice{mmdbtype.Map{
		"geoname_id": mmdbtype.Uint32(2),
		"iso_code":   mmdbtype.String("XX1"),
		"names":      names("Region", "Region"),
	}}
	return r
}

// oddNetworks are records that name no usable country, the same in every
// layout.
var oddNetworks = []network{
	// Only a registered country, as for some anycast networks.
	{"1.0.0.0/24", mmdbtype.Map{"continent": oceania, "registered_country": aussie}},
	// A country without a code.
	{"67.43.156.0/24", mmdbtype.Map{"country": mmdbtype.Map{"names": names("Nowhere", "Nirgends")}}},
	// Codes of the wrong length, or not letters, or not a string.
	{"217.65.48.0/24", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("RUS")}}},
	{"217.65.49.0/24", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("R1")}}},
	{"217.65.50.0/24", mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.Uint32(7)}}},
	{"217.65.51.0/24", mmdbtype.Map{"country": mmdbtype.String("RU")}},
	// An empty record.
	{"217.65.52.0/24", mmdbtype.Map{}},
}

// countryNetworks is a GeoLite2-Country database: IPv4 and IPv6 networks.
func countryNetworks() []network {
	return append([]network{
		{"5.255.0.0/16", countryRecord(europe, russia)},
		{"8.8.8.0/24", countryRecord(northAmerica, usa)},
		{"81.2.69.0/24", countryRecord(europe, britain)},
		{"89.160.20.0/24", countryRecord(europe, sweden)},
		{"175.16.199.0/24", countryRecord(asia, china)},
		{"2a02:6b8::/32", countryRecord(europe, russia)},
		{"2001:4860::/32", countryRecord(northAmerica, usa)},
		{"2a02:cf40::/29", countryRecord(europe, sweden)},
	}, oddNetworks...)
}

// cityNetworks is a GeoIP2-City database over the same networks.
func cityNetworks() []network {
	return append([]network{
		{"5.255.0.0/16", cityRecord(europe, russia, "Moscow", 55.75, 37.62)},
		{"8.8.8.0/24", cityRecord(northAmerica, usa, "Mountain View", 37.39, -122.08)},
		{"81.2.69.0/24", cityRecord(europe, britain, "London", 51.51, -0.09)},
		{"89.160.20.0/24", cityRecord(europe, sweden, "Linköping", 58.41, 15.62)},
		{"175.16.199.0/24", cityRecord(asia, china, "Changchun", 43.88, 125.32)},
		{"2a02:6b8::/32", cityRecord(europe, russia, "Moscow", 55.75, 37.62)},
		{"2001:4860::/32", cityRecord(northAmerica, usa, "Mountain View", 37.39, -122.08)},
		{"2a02:cf40::/29", cityRecord(europe, sweden, "Stockholm", 59.33, 18.06)},
	}, oddNetworks...)
}

// v4Networks keeps the IPv4 networks only, for an IPv4-only database.
func v4Networks(nets []network) []network {
	var out []network
	for _, n := range nets {
		if ip, _, _ := net.ParseCIDR(n.cidr); ip.To4() != nil {
			out = append(out, n)
		}
	}
	return out
}

// asnNetworks is a GeoLite2-ASN database: no country anywhere.
func asnNetworks() []network {
	asn := func(n uint32, org string) mmdbtype.Map {
		return mmdbtype.Map{
			"autonomous_system_number":       mmdbtype.Uint32(n),
			"autonomous_system_organization": mmdbtype.String(org),
		}
	}
	return []network{
		{"5.255.0.0/16", asn(13238, "YANDEX LLC")},
		{"8.8.8.0/24", asn(15169, "GOOGLE")},
		{"2001:4860::/32", asn(15169, "GOOGLE")},
	}
}
