// Package mmdbtest writes small country and ASN databases in the MaxMind
// format, with MaxMind's own writer, for the tests of the Caddy module and
// the integration tests: nothing is downloaded and no binary fixture is
// kept. The geo package has its own, fuller builders (City layouts, record
// sizes, reserved networks).
package mmdbtest

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Write writes a GeoLite2-Country layout database to path, mapping each
// network (CIDR, IPv4 or IPv6) to a country code, with the records the
// real database has (country and continent with localized names). It
// replaces the file by renaming a new one over it, as a database updater
// does, so a process that has the old file open is not disturbed.
func Write(path string, countries map[string]string) error {
	return write(path, "GeoLite2-Country", countries, func(code string) mmdbtype.Map {
		return mmdbtype.Map{
			"continent": mmdbtype.Map{"code": mmdbtype.String("EU"), "geoname_id": mmdbtype.Uint32(6255148)},
			"country": mmdbtype.Map{
				"iso_code":   mmdbtype.String(code),
				"geoname_id": mmdbtype.Uint32(1),
				"names":      mmdbtype.Map{"en": mmdbtype.String("Country " + code)},
			},
		}
	})
}

// AS is an autonomous system's record in an ASN database.
type AS struct {
	Number uint32
	Org    string
}

// WriteASN writes a GeoLite2-ASN layout database to path, mapping each
// network (CIDR, IPv4 or IPv6) to an autonomous system, with the record
// the real database has (autonomous_system_number and
// autonomous_system_organization). It replaces the file as Write does.
func WriteASN(path string, systems map[string]AS) error {
	return write(path, "GeoLite2-ASN", systems, func(as AS) mmdbtype.Map {
		return mmdbtype.Map{
			"autonomous_system_number":       mmdbtype.Uint32(as.Number),
			"autonomous_system_organization": mmdbtype.String(as.Org),
		}
	})
}

// write writes a database of dbType to path, each network's record made
// by record from its value, inserted in the networks' order.
func write[V any](path, dbType string, networks map[string]V, record func(V) mmdbtype.Map) error {
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: dbType,
		Description:  map[string]string{"en": "edgelimit test database"},
		Languages:    []string{"en"},
		RecordSize:   24,
	})
	if err != nil {
		return err
	}
	for _, cidr := range slices.Sorted(maps.Keys(networks)) {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			return err
		}
		if err := tree.Insert(network, record(networks[cidr])); err != nil {
			return fmt.Errorf("inserting %s: %w", cidr, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mmdbtest-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tree.WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
