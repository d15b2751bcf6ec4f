package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

// The clients of the geo tests: one address in each country of the test
// database, and one it does not know.
const (
	clientRU      = "5.255.255.9"
	clientUS      = "3.0.0.9"
	clientDE      = "81.2.69.9"
	clientUnknown = "9.9.9.9"
)

// testCountries is the test database: RU, US and DE networks.
var testCountries = map[string]string{
	"5.255.255.0/24": "RU",
	"3.0.0.0/16":     "US",
	"81.2.69.0/24":   "DE",
	"2a02:6b8::/32":  "RU",
}

// writeCountries writes a country database of networks to a new file and
// returns its path.
func writeCountries(t *testing.T, networks map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "country.mmdb")
	if err := mmdbtest.Write(path, networks); err != nil {
		t.Fatal(err)
	}
	return path
}

// seedGeoRule is the seed's public rule: 1000 a minute by IP, RU 1.5,
// US 1.0, others 0.5. It uses the log-structured sliding window, exact
// whenever the test runs (the default sliding window counter is an
// estimate across window boundaries); {http.rate_limit.country} is the
// body.
const seedGeoRule = `
:{{.HTTP}} {
	rate_limit {
		name public
		limit 1000 1m
		algorithm sliding_log
		by ip
		geo_multiplier RU 1.5 US 1.0 default 0.5
	}
	respond "{http.rate_limit.country}"
}
`

// geoGlobals is a global options block trusting loopback as a proxy, with
// the rate_limit app options given.
func geoGlobals(appOptions string) string {
	return `{
	{{.Global}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}
	rate_limit {
		` + appOptions + `
	}
}
`
}

// admissions sends n requests with the header pairs and counts the 200s.
func admissions(t *testing.T, p *caddyProc, n int, headers ...string) int {
	t.Helper()
	return count(t, n, func() int { return p.status(t, "/", headers...) })[200]
}

// TestGeoMultiplierDatabase: the seed's rule gives exactly 1500, 1000 and
// 500 requests a minute to clients in RU, US and elsewhere, their country
// read from a geoip database by client IP (given by X-Forwarded-For from
// a trusted proxy).
func TestGeoMultiplierDatabase(t *testing.T) {
	t.Parallel()
	db := writeCountries(t, testCountries)
	p := startCaddy(t, geoGlobals("geoip {$EDGELIMIT_GEOIP}")+seedGeoRule, "EDGELIMIT_GEOIP="+db)
	for _, c := range []struct {
		client string
		want   int
	}{{clientRU, 1500}, {clientUS, 1000}, {clientDE, 500}, {clientUnknown, 500}, {"2a02:6b8::1", 1500}} {
		if got := admissions(t, p, c.want+100, xff(c.client)...); got != c.want {
			t.Errorf("client %s: %d admitted, want %d", c.client, got, c.want)
		}
	}
}

// TestGeoMultiplierHeader: the same with the country from geo_header,
// sent by a trusted proxy, and no database.
func TestGeoMultiplierHeader(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, geoGlobals("geo_header CF-IPCountry")+seedGeoRule)
	for i, c := range []struct {
		country string
		want    int
	}{{"RU", 1500}, {"us", 1000}, {"DE", 500}, {"XX", 500}} {
		client := fmt.Sprintf("192.0.2.%d", i+1)
		if got := admissions(t, p, c.want+100, append(xff(client), "CF-IPCountry", c.country)...); got != c.want {
			t.Errorf("CF-IPCountry %s: %d admitted, want %d", c.country, got, c.want)
		}
	}
}

// TestGeoHeaderUntrusted: a client talking to Caddy directly cannot pick
// its country with the header: without trusted_proxies it is ignored, and
// the database decides (loopback: unknown, the default 0.5).
func TestGeoHeaderUntrusted(t *testing.T) {
	t.Parallel()
	db := writeCountries(t, testCountries)
	p := startCaddy(t, `{
	{{.Global}}
	rate_limit {
		geoip {$EDGELIMIT_GEOIP}
		geo_header CF-IPCountry
	}
}
`+seedGeoRule, "EDGELIMIT_GEOIP="+db)
	if got := admissions(t, p, 600, "CF-IPCountry", "RU"); got != 500 {
		t.Errorf("untrusted CF-IPCountry: RU: %d admitted, want 500 (the default)", got)
	}
	if _, _, body := p.get(t, "/", "CF-IPCountry", "RU"); body != "" {
		t.Errorf("untrusted CF-IPCountry: {http.rate_limit.country} = %q, want empty", body)
	}
	if line := p.waitLog(`"level":"warn"`, `does not come from one of the server's trusted_proxies`); line == "" {
		t.Error("no warning about the ignored geo_header")
	} else if n := strings.Count(p.log(), "does not come from one of the server's trusted_proxies"); n != 1 {
		t.Errorf("the warning about the ignored geo_header was logged %d times, want once", n)
	}
}

// TestGeoReloadReadsNewDatabase: a reload after the database file was
// rebuilt reads the new one, without a restart, and the client keeps its
// counters: its country changes its limit, not its key.
func TestGeoReloadReadsNewDatabase(t *testing.T) {
	t.Parallel()
	db := writeCountries(t, testCountries)
	config := geoGlobals("geoip "+db) + seedGeoRule
	p := startCaddy(t, config)
	check := func(when, wantCountry, wantPolicy string) {
		t.Helper()
		code, h, body := p.get(t, "/", xff(clientRU)...)
		if code != 200 || body != wantCountry || h.Get("RateLimit-Policy") != wantPolicy {
			t.Errorf("%s: %d, country %q, RateLimit-Policy %q; want 200, %q, %q",
				when, code, body, h.Get("RateLimit-Policy"), wantCountry, wantPolicy)
		}
	}
	check("before", "RU", `"public";q=1500;w=60`)
	if got := admissions(t, p, 899, xff(clientRU)...); got != 899 {
		t.Fatalf("%d admitted, want 899", got)
	}

	moved := map[string]string{"5.255.255.0/24": "US"}
	if err := mmdbtest.Write(db, moved); err != nil {
		t.Fatal(err)
	}
	check("file rebuilt, no reload yet", "RU", `"public";q=1500;w=60`)
	p.forceReload(t, config)
	check("after the reload", "US", `"public";q=1000;w=60`)
	// 902 taken (three checks and 899), of the 1000 a US client has
	if got := admissions(t, p, 200, xff(clientRU)...); got != 98 {
		t.Errorf("after the reload: %d more admitted, want 98 (counters kept)", got)
	}
}

// TestGeoConfigErrors: a geoip database that is missing, or not a
// country database, fails `caddy validate` naming the path; a rule with
// geo_multiplier and no country source fails it too.
func TestGeoConfigErrors(t *testing.T) {
	t.Parallel()
	needCaddy(t)
	dir := t.TempDir()
	notADB := filepath.Join(dir, "not-a-db.mmdb")
	if err := os.WriteFile(notADB, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	site := strings.ReplaceAll(seedGeoRule, "{{.HTTP}}", "8080")
	for _, c := range []struct {
		name, caddyfile, want string
	}{
		{"missing", "{\n\trate_limit {\n\t\tgeoip " + filepath.Join(dir, "missing.mmdb") + "\n\t}\n}\n" + site,
			`loading geoip database "` + filepath.Join(dir, "missing.mmdb") + `": no such file or directory`},
		{"not a database", "{\n\trate_limit {\n\t\tgeoip " + notADB + "\n\t}\n}\n" + site,
			`loading geoip database "` + notADB + `": not a valid MaxMind database`},
		{"no country source", site,
			`rule "public": geo_multiplier needs the client's country`}, // at its line, by the adapter
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".Caddyfile")
		if err := os.WriteFile(file, []byte(c.caddyfile), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddyBin, "validate", "--config", file, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: caddy validate passed; want it to fail", c.name)
			continue
		}
		if !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), c.want) {
			t.Errorf("%s: caddy validate said:\n%s\nwant it to contain %q", c.name, out, c.want)
		}
	}
}

// TestGeoFileCheckWithoutReload: with geoip_check_interval, a database
// rebuilt on disk is put in force without a reload.
func TestGeoFileCheckWithoutReload(t *testing.T) {
	t.Parallel()
	db := writeCountries(t, testCountries)
	p := startCaddy(t, geoGlobals("geoip "+db+"\n\t\tgeoip_check_interval 20ms")+seedGeoRule)
	if _, _, body := p.get(t, "/", xff(clientRU)...); body != "RU" {
		t.Fatalf("before: country %q, want RU", body)
	}
	if err := mmdbtest.Write(db, map[string]string{"5.255.255.0/24": "US"}); err != nil {
		t.Fatal(err)
	}
	h := waitBody(t, p, "/", "US", xff(clientRU)...)
	if h.Get("RateLimit-Policy") != `"public";q=1000;w=60` {
		t.Errorf("after the change: RateLimit-Policy %q", h.Get("RateLimit-Policy"))
	}
	if p.waitLog("geoip database changed on disk and was read again") == "" {
		t.Error("no log line for the database read again")
	}
}

// waitBody asks p for path with the header pairs every 20 ms until the
// body is want, for up to 5 s (a file check running every 20ms in Caddy),
// and returns that answer's headers.
func waitBody(t *testing.T, p *caddyProc, path, want string, headers ...string) http.Header {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, h, body := p.get(t, path, headers...)
		if body == want {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rebuilt database was not put in force: body %q, want %q", body, want)
		}
	}
}
