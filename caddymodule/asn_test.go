package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

// testSystems are the networks of the test ASN database: two of
// GOOGLE's, one of YANDEX's (5.255.255.0/24, RU in testCountries).
var testSystems = map[string]mmdbtest.AS{
	"8.8.8.0/24":     {Number: 15169, Org: "GOOGLE"},
	"8.34.208.0/20":  {Number: 15169, Org: "GOOGLE"},
	"2001:4860::/32": {Number: 15169, Org: "GOOGLE"},
	"5.255.255.0/24": {Number: 13238, Org: "YANDEX LLC"},
}

// withASN gives app an ASN database of testSystems.
func withASN(t testing.TB, app *App) *App {
	t.Helper()
	app.ASNDB = filepath.Join(t.TempDir(), "asn.mmdb")
	if err := mmdbtest.WriteASN(app.ASNDB, testSystems); err != nil {
		t.Fatal(err)
	}
	var err error
	if app.asn, err = provisionASNDB(app.ASNDB, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Cleanup() })
	return app
}

// TestByASN: the addresses of one system share a key, another system has
// its own, and an address of none follows on_missing_key.
func TestByASN(t *testing.T) {
	r := hourly("net", 3)
	r.By = []string{"asn"}
	h := testHandler(t, withASN(t, testApp()), r)
	from := func(ip string) func() *http.Request { return func() *http.Request { return newRequest(ip) } }
	if got := admitted(t, h, 2, from("8.8.8.8")) + admitted(t, h, 2, from("8.34.210.1")) + admitted(t, h, 2, from("2001:4860::1")); got != 3 {
		t.Errorf("GOOGLE's three networks: %d of 6 admitted, want 3 (one key)", got)
	}
	if got := admitted(t, h, 5, from("5.255.255.9")); got != 3 {
		t.Errorf("YANDEX: %d of 5 admitted, want 3 (a key of its own)", got)
	}
	if got := admitted(t, h, 5, from("9.9.9.9")); got != 5 {
		t.Errorf("no system (on_missing_key skip): %d of 5 admitted, want 5", got)
	}
	r.Name, r.OnMissingKey = "net-ip", ruleconfig.MissingIP
	h = testHandler(t, withASN(t, testApp()), r)
	if got := admitted(t, h, 5, from("9.9.9.9")) + admitted(t, h, 5, from("9.9.9.10")); got != 6 {
		t.Errorf("no system (on_missing_key ip): %d of 10 admitted, want 6 (3 an address)", got)
	}
}

// TestASNMultiplier: asn_multiplier scales the limit per system, and with
// geo_multiplier both apply; the placeholders name the system.
func TestASNMultiplier(t *testing.T) {
	r := hourly("scaled", 10)
	r.ASNMultiplier = map[string]float64{"AS15169": 0.5, "13238": 2, "default": 1}
	r.GeoMultiplier = map[string]float64{"RU": 1.5}
	h := testHandler(t, withASN(t, geoApp(t)), r)
	for _, c := range []struct {
		ip, policy, asn, org string
		n                    int
	}{
		{"8.8.8.8", `"scaled";q=5;w=3600`, "AS15169", "GOOGLE", 5},           // 10 × 0.5
		{"5.255.255.9", `"scaled";q=30;w=3600`, "AS13238", "YANDEX LLC", 30}, // 10 × 2 × 1.5 (RU)
		{"9.9.9.9", `"scaled";q=10;w=3600`, "", "", 10},                      // the defaults
	} {
		req := newRequest(c.ip)
		w := httptest.NewRecorder()
		if err := chain(h).ServeHTTP(w, req); err != nil {
			t.Fatal(err)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != c.policy {
			t.Errorf("%s: RateLimit-Policy %q, want %q", c.ip, got, c.policy)
		}
		repl := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		asn, _ := repl.GetString("http.rate_limit.asn")
		org, _ := repl.GetString("http.rate_limit.asn_org")
		if asn != c.asn || org != c.org {
			t.Errorf("%s: placeholders asn %q, asn_org %q; want %q, %q", c.ip, asn, org, c.asn, c.org)
		}
		if got := 1 + admitted(t, h, c.n+5, func() *http.Request { return newRequest(c.ip) }); got != c.n {
			t.Errorf("%s: %d admitted, want %d", c.ip, got, c.n)
		}
	}
}

// TestASNNeeds: a rule keyed by asn, or with asn_multiplier, needs the
// app's asn_db; a bad asn_multiplier is refused.
func TestASNNeeds(t *testing.T) {
	by, mult := hourly("x", 1), hourly("x", 1)
	by.By = []string{"ip", "asn"}
	mult.ASNMultiplier = map[string]float64{"AS1": 2}
	for i, c := range []struct {
		r    ruleconfig.Rule
		sub  string
		want string
	}{
		{by, "by", "by asn needs the client's autonomous system: set the global option rate_limit { asn_db <GeoLite2-ASN.mmdb> }"},
		{mult, "asn_multiplier", "asn_multiplier needs the client's autonomous system: set the global option rate_limit { asn_db <GeoLite2-ASN.mmdb> }"},
	} {
		sub, err := testApp().MissingFor(&c.r)
		if sub != c.sub || err == nil || err.Error() != c.want {
			t.Errorf("Test %d: MissingFor = %q, %v; want %q, %s", i, sub, err, c.sub, c.want)
		}
		app := &App{ASNDB: "asn.mmdb"}
		if sub, err := app.MissingFor(&c.r); err != nil {
			t.Errorf("Test %d: with asn_db: MissingFor = %q, %v", i, sub, err)
		}
	}
	mult.ASNMultiplier = map[string]float64{"AS0": 2}
	if _, err := newRule(mult); err == nil || err.Error() != `asn_multiplier: key "AS0": not an AS number (1 to 4294967295, such as AS15169 or 15169) or "default"` {
		t.Errorf("AS0: %v", err)
	}
}

// TestASNDBShared: a second config naming the same unchanged file shares
// the open database (as a reload does); a changed file is read anew; the
// last release frees it.
func TestASNDBShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "asn.mmdb")
	if err := mmdbtest.WriteASN(path, testSystems); err != nil {
		t.Fatal(err)
	}
	a, err := provisionASNDB(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	b, err := provisionASNDB(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if a.load() != b.load() {
		t.Error("the second provision read the unchanged file again")
	}
	if err := mmdbtest.WriteASN(path, map[string]mmdbtest.AS{"8.8.8.0/24": {Number: 15169, Org: "GOOGLE"}}); err != nil {
		t.Fatal(err)
	}
	c, err := provisionASNDB(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if c.load() == a.load() {
		t.Error("a changed file was not read anew")
	}
	keys := []geoFile{*a.file, *c.file}
	if refs, _ := geoDatabases.References(keys[0]); refs != 2 {
		t.Errorf("the first file has %d references; want 2", refs)
	}
	for _, n := range []*asnDB{a, b, c} {
		if err := n.cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if refs, ok := geoDatabases.References(k); ok {
			t.Errorf("after the last release the pool holds %s with %d references", k.path, refs)
		}
	}
}

// TestASNFileCheck: with geoip_check_interval, each check (App.checkFiles,
// what the interval's ticks call; driven here by hand) reads a changed
// asn_db file and puts it in force without a reload: an address moved to
// another system gets that system's key. An unchanged file is not read
// again; one that fails to read leaves the database in force, and is not
// read again until it changes again.
func TestASNFileCheck(t *testing.T) {
	r := hourly("net", 1)
	r.By = []string{"asn"}
	app := withASN(t, testApp())
	app.GeoIPCheckInterval = caddy.Duration(time.Hour)
	if err := app.Validate(); err != nil {
		t.Fatalf("geoip_check_interval with asn_db alone: %v", err)
	}
	h := testHandler(t, app, r)
	from := func(ip string) func() *http.Request { return func() *http.Request { return newRequest(ip) } }
	path, seen := app.asn.seen.path, app.asn.load()
	lookup := func(ip string) (*geo.AS, bool) { return app.asn.load().Lookup(netip.MustParseAddr(ip)) }
	touch := func(step int) {
		t.Helper()
		later := time.Now().Add(time.Duration(step) * time.Second)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := admitted(t, h, 1, from("8.8.8.8")) + admitted(t, h, 1, from("8.34.210.1")); got != 1 {
		t.Fatalf("GOOGLE's two networks: %d of 2 admitted, want 1 (one key)", got)
	}
	app.checkFiles()
	if app.asn.load() != seen {
		t.Fatal("an unchanged file was read again")
	}
	moved := map[string]mmdbtest.AS{"8.8.8.0/24": {Number: 15169, Org: "GOOGLE"}, "8.34.208.0/20": {Number: 396982, Org: "GOOGLE-CLOUD-PLATFORM"}}
	if err := mmdbtest.WriteASN(path, moved); err != nil {
		t.Fatal(err)
	}
	touch(1)
	if got := admitted(t, h, 1, from("8.34.210.1")); got != 0 {
		t.Fatalf("before the check: %d of 1 admitted, want 0 (the old database: AS15169's key)", got)
	}
	app.checkFiles()
	if got := admitted(t, h, 2, from("8.34.210.1")); got != 1 {
		t.Errorf("after the check: %d of 2 admitted, want 1 (AS396982, a key of its own)", got)
	}
	if as, ok := lookup("8.34.210.1"); !ok || as.Key != "AS396982" || as.Org != "GOOGLE-CLOUD-PLATFORM" {
		t.Errorf("after the check: 8.34.210.1 in %v, want AS396982 GOOGLE-CLOUD-PLATFORM", as)
	}
	if err := os.WriteFile(path, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	touch(2)
	inForce := app.asn.load()
	app.checkFiles()
	if app.asn.load() != inForce {
		t.Error("a broken file replaced the database in force")
	}
	if as, ok := lookup("8.34.210.1"); !ok || as.Key != "AS396982" {
		t.Errorf("after a broken file: 8.34.210.1 in %v, want AS396982 still", as)
	}
	if app.asn.checkFile() {
		t.Error("the broken file, unchanged, was read again")
	}
}
