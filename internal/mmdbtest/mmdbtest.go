// Package mmdbtest writes small country databases in the MaxMind format,
// with MaxMind's own writer, for the tests of the Caddy module and the
// integration tests: nothing is downloaded and no binary fixture is kept.
// The geo package has its own, fuller builders (City layouts, record
// sizes, reserved networks).
package mmdbtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Write writes a GeoLite2-Country layout database to path, mapping each
// network (CIDR, IPv4 or IPv6) to a country code, with the records the
// real database has (country and continent with localized names). It
// replaces the file by renaming a new one over it, as a database updater
// does, so a process that has the old file open is not disturbed.
func Write(path string, countries map[string]string) error {
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "GeoLite2-Country",
		Description:  map[string]string{"en": "edgelimit test database"},
		Languages:    []string{"en"},
		RecordSize:   24,
	})
	if err != nil {
		return err
	}
	for cidr, code := range countries {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			return err
		}
		record := mmdbtype.Map{
			"continent": mmdbtype.Map{"code": mmdbtype.String("EU"), "geoname_id": mmdbtype.Uint32(6255148)},
			"country": mmdbtype.Map{
				"iso_code":   mmdbtype.String(code),
				"geoname_id": mmdbtype.Uint32(1),
				"names":      mmdbtype.Map{"en": mmdbtype.String("Country " + code)},
			},
		}
		if err := tree.Insert(network, record); err != nil {
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
