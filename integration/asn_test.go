package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

// testSystems is the test ASN database: two networks of GOOGLE, one of
// Amazon, one of DigitalOcean, one of Yandex (5.255.255.0/24, RU in
// testCountries).
var testSystems = map[string]mmdbtest.AS{
	"8.8.8.0/24":     {Number: 15169, Org: "GOOGLE"},
	"8.8.4.0/24":     {Number: 15169, Org: "GOOGLE"},
	"3.5.0.0/16":     {Number: 16509, Org: "AMAZON-02"},
	"104.131.0.0/16": {Number: 14061, Org: "DIGITALOCEAN-ASN"},
	"5.255.255.0/24": {Number: 13238, Org: "YANDEX LLC"},
	"3.0.0.0/16":     {Number: 16509, Org: "AMAZON-02"},
}

// writeSystems writes an ASN database of networks to a new file and
// returns its path.
func writeSystems(t *testing.T, networks map[string]mmdbtest.AS) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "asn.mmdb")
	if err := mmdbtest.WriteASN(path, networks); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExampleASN: the addresses of one network share its quota, scaled
// by asn_multiplier; an address of none has its own; the body names the
// network.
func TestExampleASN(t *testing.T) {
	t.Parallel()
	p := startExample(t, "asn.Caddyfile", "EDGELIMIT_ASN_DB="+writeSystems(t, testSystems))
	alternate := func(a, b string) []int {
		var got []int
		for i := range 12 {
			ip := a
			if i%2 == 1 {
				ip = b
			}
			got = append(got, p.status(t, "/api/x", xff(ip)...))
		}
		return got
	}
	wantStatuses(t, "GOOGLE, two networks", alternate("8.8.8.1", "8.8.4.4"), seq(10, 200, 2, 429))
	wantStatuses(t, "Amazon (0.5)", alternate("3.5.1.1", "3.5.200.9"), seq(5, 200, 7, 429))
	wantStatuses(t, "DigitalOcean (0)", p.statuses(t, 2, "/api/x", xff("104.131.0.1")...), seq(0, 200, 2, 429))
	wantStatuses(t, "no network: by address", p.statuses(t, 11, "/api/x", xff("9.9.9.9")...), seq(10, 200, 1, 429))
	wantStatuses(t, "no network, another address", p.statuses(t, 1, "/api/x", xff("9.9.9.10")...), seq(1, 200, 0, 429))
	code, h, body := p.get(t, "/api/x", xff("5.255.255.9")...)
	if code != 200 || body != "Hello, client of AS13238 (YANDEX LLC)." || h.Get("RateLimit-Policy") != `"per_network";q=10;w=60` {
		t.Errorf("Yandex: %d %q, RateLimit-Policy %q", code, body, h.Get("RateLimit-Policy"))
	}
}

// TestASNWithGeoAndCompositeKey: asn_multiplier and geo_multiplier both
// apply (their product); `by asn header X-Client` keys by the network and
// the header together; the placeholders are in the response; the
// admin API shows the network beside a key by address.
func TestASNWithGeoAndCompositeKey(t *testing.T) {
	t.Parallel()
	globals := geoGlobals("geoip " + writeCountries(t, testCountries) + "\n\t\tasn_db " + writeSystems(t, testSystems))
	p := startCaddy(t, globals+`
:{{.HTTP}} {
	rate_limit /scaled {
		name scaled
		limit 10 1h
		by ip
		geo_multiplier RU 2 default 1
		asn_multiplier AS13238 1.5 AS16509 0.5
	}
	rate_limit /composite {
		name composite
		limit 2 1h
		by asn header X-Client
	}
	respond "{http.rate_limit.asn}|{http.rate_limit.asn_org}|{http.rate_limit.country}"
}
`)
	for _, c := range []struct {
		ip, body string
		want     int
	}{
		{clientRU, "AS13238|YANDEX LLC|RU", 30}, // 10 × 2 (RU) × 1.5 (AS13238)
		{clientUS, "AS16509|AMAZON-02|US", 5},   // 10 × 1 × 0.5
		{clientDE, "||DE", 10},                  // no network: the defaults
	} {
		code, _, body := p.get(t, "/scaled", xff(c.ip)...)
		if code != 200 || body != c.body {
			t.Errorf("%s: %d %q; want 200 %q", c.ip, code, body, c.body)
		}
		wantStatuses(t, c.ip, p.statuses(t, c.want+1, "/scaled", xff(c.ip)...), seq(c.want-1, 200, 2, 429))
	}
	client := func(ip, id string) []string { return append(xff(ip), "X-Client", id) }
	wantStatuses(t, "GOOGLE a", append(p.statuses(t, 1, "/composite", client("8.8.8.1", "a")...),
		p.statuses(t, 2, "/composite", client("8.8.4.1", "a")...)...), seq(2, 200, 1, 429))
	wantStatuses(t, "GOOGLE b", p.statuses(t, 3, "/composite", client("8.8.8.1", "b")...), seq(2, 200, 1, 429))
	wantStatuses(t, "Amazon a", p.statuses(t, 3, "/composite", client("3.5.0.1", "a")...), seq(2, 200, 1, 429))
	wantStatuses(t, "no network: no key, not limited", p.statuses(t, 3, "/composite", client("9.9.9.9", "a")...), seq(3, 200, 0, 429))

	var top struct {
		Keys []struct {
			Key    string `json:"key"`
			ASN    string `json:"asn"`
			ASNOrg string `json:"asn_org"`
		} `json:"keys"`
	}
	p.adminJSON(t, "/rate_limit/rules/scaled/keys", &top)
	got := map[string]string{}
	for _, k := range top.Keys {
		got[k.Key] = k.ASN + " " + k.ASNOrg
	}
	if want := map[string]string{clientRU: "AS13238 YANDEX LLC", clientUS: "AS16509 AMAZON-02", clientDE: " "}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("top keys of scaled: %v; want %v", got, want)
	}
}

// TestASNConfigErrors: an asn_db that is missing, or a country database,
// fails `caddy validate` at its line; a rule keyed by asn without one
// fails it too.
func TestASNConfigErrors(t *testing.T) {
	t.Parallel()
	needCaddy(t)
	dir := t.TempDir()
	country := writeCountries(t, testCountries)
	missing := filepath.Join(dir, "missing.mmdb")
	site := "\n:8080 {\n\trate_limit {\n\t\tlimit 10 1m\n\t\tby asn\n\t}\n}\n"
	for _, c := range []struct {
		name, caddyfile, want string
	}{
		{"country database", "{\n\trate_limit {\n\t\tasn_db " + country + "\n\t}\n}\n" + site,
			`asn_db: loading ASN database "` + country + `": database type "GeoLite2-Country" has no autonomous system numbers (autonomous_system_number); use an ASN database such as GeoLite2-ASN, at `},
		{"missing", "{\n\trate_limit {\n\t\tasn_db " + missing + "\n\t}\n}\n" + site,
			`asn_db: loading ASN database "` + missing + `": no such file or directory, at `},
		{"no asn_db", site, "by asn needs the client's autonomous system: set the global option rate_limit { asn_db <GeoLite2-ASN.mmdb> }, at "},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".Caddyfile")
		if err := os.WriteFile(file, []byte(c.caddyfile), 0o644); err != nil {
			t.Fatal(err)
		}
		line := 3
		if c.name == "no asn_db" {
			line = 5
		}
		cmd := exec.Command(caddyBin, "validate", "--config", file, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
		out, err := cmd.CombinedOutput()
		want := c.want + fmt.Sprintf("%s:%d", file, line)
		if err == nil {
			t.Errorf("%s: caddy validate passed; want it to fail", c.name)
		} else if !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), want) {
			t.Errorf("%s: caddy validate said:\n%s\nwant it to contain %q", c.name, out, want)
		}
	}
}

// TestASNFileCheckWithoutReload: geoip_check_interval checks asn_db's
// file too (here without geoip): a database rebuilt on disk is put in
// force without a reload, and the rule keys by the new network.
func TestASNFileCheckWithoutReload(t *testing.T) {
	t.Parallel()
	db := writeSystems(t, testSystems)
	p := startCaddy(t, geoGlobals("asn_db "+db+"\n\t\tgeoip_check_interval 20ms")+`
:{{.HTTP}} {
	rate_limit {
		name per_network
		limit 2 1h
		by asn
	}
	respond "{http.rate_limit.asn} {http.rate_limit.asn_org}"
}
`)
	if _, _, body := p.get(t, "/", xff("8.8.4.4")...); body != "AS15169 GOOGLE" {
		t.Fatalf("before: %q, want AS15169 GOOGLE", body)
	}
	wantStatuses(t, "GOOGLE's other network, before", p.statuses(t, 2, "/", xff("8.8.8.8")...), seq(1, 200, 1, 429))
	moved := map[string]mmdbtest.AS{"8.8.8.0/24": {Number: 15169, Org: "GOOGLE"}, "8.8.4.0/24": {Number: 396982, Org: "GOOGLE-CLOUD-PLATFORM"}}
	if err := mmdbtest.WriteASN(db, moved); err != nil {
		t.Fatal(err)
	}
	waitBody(t, p, "/", "AS396982 GOOGLE-CLOUD-PLATFORM", xff("8.8.4.4")...)
	wantStatuses(t, "AS396982, a key of its own", p.statuses(t, 2, "/", xff("8.8.4.5")...), seq(1, 200, 1, 429))
	wantStatuses(t, "AS15169, spent", p.statuses(t, 1, "/", xff("8.8.8.8")...), seq(0, 200, 1, 429))
	if p.waitLog("ASN database changed on disk and was read again") == "" {
		t.Error("no log line for the database read again")
	}
}
