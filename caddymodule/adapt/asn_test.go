package adapt

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

// TestParseGlobalOptionASNDB: asn_db takes the path of an ASN database,
// which the adapter checks, so that a missing file or a country database
// fails at the line that names it; a path with a placeholder is left for
// load.
func TestParseGlobalOptionASNDB(t *testing.T) {
	dir := t.TempDir()
	asn, country := filepath.Join(dir, "asn.mmdb"), filepath.Join(dir, "country.mmdb")
	if err := mmdbtest.WriteASN(asn, map[string]mmdbtest.AS{"8.8.8.0/24": {Number: 15169, Org: "GOOGLE"}}); err != nil {
		t.Fatal(err)
	}
	if err := mmdbtest.Write(country, map[string]string{"5.255.255.0/24": "RU"}); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.mmdb")
	for i, tc := range []struct {
		input   string
		want    string // the app as JSON, or
		wantErr string // the error, whole
	}{
		{input: "rate_limit {\n asn_db " + asn + "\n}", want: `{"asn_db":"` + asn + `"}`},
		{input: "rate_limit {\n geoip " + country + "\n asn_db " + asn + "\n}", want: `{"geoip":"` + country + `","asn_db":"` + asn + `"}`},
		{input: "rate_limit {\n asn_db {env.ASN_DB}\n}", want: `{"asn_db":"{env.ASN_DB}"}`}, // checked at load
		{input: "rate_limit {\n asn_db\n}", wantErr: "wrong argument count or unexpected line ending after 'asn_db', at Testfile:2"},
		{input: "rate_limit {\n asn_db a.mmdb b.mmdb\n}", wantErr: "wrong argument count or unexpected line ending after 'a.mmdb', at Testfile:2"},
		{input: "rate_limit {\n sweep_interval 1m\n asn_db " + missing + "\n}", wantErr: `asn_db: loading ASN database "` + missing + `": no such file or directory, at Testfile:3`},
		{input: "rate_limit {\n asn_db " + country + "\n}", wantErr: `asn_db: loading ASN database "` + country + `": database type "GeoLite2-Country" has no autonomous system numbers (autonomous_system_number); use an ASN database such as GeoLite2-ASN, at Testfile:2`},
	} {
		got, err := parseGlobalOption(caddyfile.NewTestDispenser(tc.input), nil)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("Test %d: error %v; want %s", i, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Test %d: %v", i, err)
			continue
		}
		if app := got.(httpcaddyfile.App); string(app.Value) != tc.want {
			t.Errorf("Test %d: got %s; want %s", i, app.Value, tc.want)
		}
	}
}

// TestASNNeedsDatabase: a rule keyed by asn or with asn_multiplier fails
// at its line without the global option's asn_db.
func TestASNNeedsDatabase(t *testing.T) {
	for i, tc := range []struct{ input, want string }{
		{":80 {\n rate_limit {\n  limit 10 1m\n  by ip asn\n }\n}", "by asn needs the client's autonomous system: set the global option rate_limit { asn_db <GeoLite2-ASN.mmdb> }"},
		{":80 {\n rate_limit {\n  limit 10 1m\n  asn_multiplier AS15169 0.5\n }\n}", "asn_multiplier needs the client's autonomous system"},
	} {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(tc.input), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Caddyfile:4") {
			t.Errorf("Test %d: error %v; want one with %q at line 4", i, err, tc.want)
		}
	}
}
