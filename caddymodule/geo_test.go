package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

// testCountries maps the test networks to countries.
var testCountries = map[string]string{
	"5.255.255.0/24": "RU",
	"3.0.0.0/16":     "US",
	"81.2.69.0/24":   "DE",
	"2a02:6b8::/32":  "RU",
}

// geoApp is an app with a geoip database of testCountries, and a
// geo_header.
func geoApp(t testing.TB) *App {
	t.Helper()
	path := filepath.Join(t.TempDir(), "country.mmdb")
	if err := mmdbtest.Write(path, testCountries); err != nil {
		t.Fatal(err)
	}
	app := testApp()
	app.GeoIP, app.GeoHeader = path, "CF-IPCountry"
	var err error
	if app.geo, err = provisionCountries(app.GeoIP, app.GeoHeader, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Cleanup() })
	return app
}

// requestFrom is newRequest, marked as coming through a trusted proxy or
// not, with the given headers.
func requestFrom(clientIP string, trusted bool, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://example.com/", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{
		caddyhttp.ClientIPVarKey:     clientIP,
		caddyhttp.TrustedProxyVarKey: trusted,
	})
	return r.WithContext(ctx)
}

func TestCountryOf(t *testing.T) {
	app := geoApp(t)
	for _, c := range []struct {
		name   string
		r      *http.Request
		want   string
		wantOK bool
	}{
		{"database v4", requestFrom("5.255.255.7", false), "RU", true},
		{"database v6", requestFrom("2a02:6b8::9", false), "RU", true},
		{"database v4-mapped", requestFrom("::ffff:3.0.0.1", false), "US", true},
		{"not in the database", requestFrom("9.9.9.9", false), "", false},
		{"private", requestFrom("10.1.2.3", false), "", false},
		{"no client IP", requestFrom("", false), "", false},
		{"trusted header wins", requestFrom("5.255.255.7", true, "CF-IPCountry", "us"), "US", true},
		{"untrusted header ignored", requestFrom("5.255.255.7", false, "CF-IPCountry", "US"), "RU", true},
		{"untrusted header, no database entry", requestFrom("9.9.9.9", false, "CF-IPCountry", "US"), "", false},
		{"trusted header names no country: database", requestFrom("3.0.0.9", true, "CF-IPCountry", "XX"), "US", true},
		{"trusted Tor: unknown", requestFrom("9.9.9.9", true, "CF-IPCountry", "T1"), "", false},
	} {
		code, ok := app.countryOf(c.r, clientIP(c.r))
		if code != c.want || ok != c.wantOK {
			t.Errorf("%s: countryOf = %q, %v; want %q, %v", c.name, code, ok, c.want, c.wantOK)
		}
	}
}

// geoRule is the seed's public rule, scaled down: 10 per hour, RU 1.5,
// US 1.0, others 0.5, and CN blocked.
func geoRule(name string) ruleconfig.Rule {
	r := hourly(name, 10)
	r.GeoMultiplier = map[string]float64{"RU": 1.5, "us": 1, "CN": 0, "default": 0.5}
	return r
}

// admitted counts the 200s of n requests made by newReq.
func admitted(t *testing.T, h *Handler, n int, newReq func() *http.Request) int {
	t.Helper()
	got := 0
	for range n {
		if status(t, chain(h), newReq()) == http.StatusOK {
			got++
		}
	}
	return got
}

func TestGeoMultiplier(t *testing.T) {
	app := geoApp(t)
	h := testHandler(t, app, geoRule("geo"))
	for _, c := range []struct {
		name string
		ip   string
		hdr  []string
		want int
	}{
		{"RU by database", "5.255.255.1", nil, 15},
		{"US by database", "3.0.0.1", nil, 10},
		{"DE: the default", "81.2.69.1", nil, 5},
		{"unknown: the default", "9.9.9.9", nil, 5},
		{"CN by trusted header: blocked", "8.8.4.4", []string{"CF-IPCountry", "CN"}, 0},
		{"RU by trusted header", "1.1.1.1", []string{"CF-IPCountry", "ru"}, 15},
	} {
		got := admitted(t, h, 20, func() *http.Request { return requestFrom(c.ip, c.hdr != nil, c.hdr...) })
		if got != c.want {
			t.Errorf("%s: %d of 20 admitted, want %d", c.name, got, c.want)
		}
	}
}

// TestGeoMultiplierHeaders: RateLimit-Policy shows the limit in force for
// the client's country, and the placeholder its country.
func TestGeoMultiplierHeaders(t *testing.T) {
	h := testHandler(t, geoApp(t), geoRule("geo"))
	for ip, want := range map[string][2]string{
		"5.255.255.1": {`"geo";q=15;w=3600`, "RU"},
		"3.0.0.1":     {`"geo";q=10;w=3600`, "US"},
		"9.9.9.9":     {`"geo";q=5;w=3600`, ""},
	} {
		r := requestFrom(ip, false)
		w := httptest.NewRecorder()
		if err := chain(h).ServeHTTP(w, r); err != nil {
			t.Fatal(err)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != want[0] {
			t.Errorf("%s: RateLimit-Policy %q, want %q", ip, got, want[0])
		}
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if got, _ := repl.GetString("http.rate_limit.country"); got != want[1] {
			t.Errorf("%s: {http.rate_limit.country} = %q, want %q", ip, got, want[1])
		}
	}
	// A blocked country: q=0, and a 429 with the window as the wait.
	r := requestFrom("9.9.9.9", true, "CF-IPCountry", "CN")
	w := httptest.NewRecorder()
	err := chain(h).ServeHTTP(w, r)
	if he, ok := err.(caddyhttp.HandlerError); !ok || he.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("blocked country: %v, want a 429", err)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"geo";q=0;w=3600` {
		t.Errorf("blocked country: RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("Retry-After"); got != "3600" {
		t.Errorf("blocked country: Retry-After %q, want 3600", got)
	}
}

// TestGeoKeepsKey: the country scales the limit, the key stays the client
// IP: a client whose country changes keeps its counters.
func TestGeoKeepsKey(t *testing.T) {
	h := testHandler(t, geoApp(t), geoRule("geo"))
	const ip = "9.9.9.9"
	if got := admitted(t, h, 20, func() *http.Request { return requestFrom(ip, true, "CF-IPCountry", "US") }); got != 10 {
		t.Fatalf("as US: %d admitted, want 10", got)
	}
	if got := admitted(t, h, 20, func() *http.Request { return requestFrom(ip, true, "CF-IPCountry", "RU") }); got != 5 {
		t.Fatalf("then as RU: %d more admitted, want 5 (15 in all)", got)
	}
	if got := admitted(t, h, 5, func() *http.Request { return requestFrom(ip, false) }); got != 0 {
		t.Fatalf("then unknown: %d more admitted, want 0 (already over 5)", got)
	}
}

// TestGeoRefundScaled: a request denied by a later rule gives back to a
// geo-scaled rule what it took, at its scale.
func TestGeoRefundScaled(t *testing.T) {
	app := geoApp(t)
	strict := hourly("strict", 2)
	h := testHandler(t, app, geoRule("geo"), strict)
	if got := admitted(t, h, 10, func() *http.Request { return requestFrom("5.255.255.1", false) }); got != 2 {
		t.Fatalf("%d admitted, want 2", got)
	}
	w := httptest.NewRecorder()
	chain(h).ServeHTTP(w, requestFrom("5.255.255.1", false))
	if got := w.Header().Values("RateLimit"); len(got) == 0 || !strings.HasPrefix(got[0], `"geo";r=13;`) {
		t.Errorf("after denials by strict: RateLimit %q, want geo at 13 remaining of 15", got)
	}
}

func TestGeoMultiplierNeedsCountries(t *testing.T) {
	_, err := newRule(ruleconfig.Rule{Name: "x", Limits: hourly("x", 1).Limits, GeoMultiplier: map[string]float64{"USA": 1}})
	if err == nil || !strings.Contains(err.Error(), `geo_multiplier: key "USA"`) {
		t.Errorf("bad code: %v", err)
	}
	_, err = newRule(ruleconfig.Rule{Name: "x", Limits: hourly("x", 1).Limits, GeoMultiplier: map[string]float64{"US": -1}})
	if err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative factor: %v", err)
	}
}

// TestGeoFileCheck: with geoip_check_interval, a changed file is read and
// put in force without a reload; a file that fails to read leaves the
// database in force.
func TestGeoFileCheck(t *testing.T) {
	app := geoApp(t)
	path := app.geo.file.seen.path
	country := func() string {
		code, _ := app.countryOf(requestFrom("5.255.255.7", false), "5.255.255.7")
		return code
	}
	if app.geo.file.checkFile() || country() != "RU" {
		t.Fatalf("unchanged file: read again, or country %s", country())
	}
	touch := func(step int) {
		t.Helper()
		later := time.Now().Add(time.Duration(step) * time.Second)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := mmdbtest.Write(path, map[string]string{"5.255.255.0/24": "US"}); err != nil {
		t.Fatal(err)
	}
	touch(1)
	if !app.geo.file.checkFile() || country() != "US" {
		t.Fatalf("rebuilt file: country %s, want US", country())
	}
	if err := os.WriteFile(path, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	touch(2)
	if app.geo.file.checkFile() || country() != "US" {
		t.Fatalf("broken file: country %s, want US still", country())
	}
}
