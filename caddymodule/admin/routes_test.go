package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage" // the storage the rules' snapshots go to
	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/internal/mmdbtest"
)

func TestPathSegments(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "[]",
		"/":                             "[]",
		"cluster":                       "[cluster]",
		"rules/api/keys/":               "[rules api keys]",
		"rules/a%20b/keys/10.0.0.0%2F8": "[rules a b keys 10.0.0.0/8]",
		"rules/x/keys/%00%1F":           "[rules x keys \x00\x1f]",
	} {
		got, err := pathSegments(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("pathSegments(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := pathSegments("rules/%zz"); err == nil {
		t.Error("a bad escape should be an error")
	}
}

// adminStatus is the status serveAdmin gives a request.
func adminStatus(t *testing.T, method, target string) int {
	t.Helper()
	w := httptest.NewRecorder()
	err := serveAdmin(w, httptest.NewRequest(method, target, nil))
	var apiErr caddy.APIError
	switch {
	case err == nil:
		return w.Code
	case errors.As(err, &apiErr):
		return apiErr.HTTPStatus
	}
	t.Fatalf("%s %s: %v", method, target, err)
	return 0
}

// load runs a Caddy config in this process, as `caddy run` would, with
// its admin endpoint off (the tests call the routes directly), until the
// test ends.
func load(t *testing.T, config string) {
	t.Helper()
	if err := caddy.Load([]byte(config), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Error(err)
		}
	})
}

// loadRules runs a config whose one route has a rate_limit handler with
// rules (JSON), under the rate_limit app app (JSON; "{}": none set),
// with Caddy's storage (where the rules' snapshots go) in a directory of
// the test's.
func loadRules(t *testing.T, app, rules string) {
	t.Helper()
	storage, _ := json.Marshal(t.TempDir())
	load(t, `{"admin": {"disabled": true}, "logging": {"logs": {"default": {"level": "ERROR"}}},
		"storage": {"module": "file_system", "root": `+string(storage)+`},
		"apps": {"rate_limit": `+app+`, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"],
		"routes": [{"handle": [{"handler": "rate_limit", "rules": `+rules+`}]}]}}}}}`)
}

// inForce is the rule in force named name.
func inForce(t *testing.T, name string) caddymodule.RuleState {
	t.Helper()
	r, ok := caddymodule.RuleInForce(name)
	if !ok {
		t.Fatalf("no rule %q in force", name)
	}
	return r
}

func TestAdminRoutes(t *testing.T) {
	const name = "admin routes test"
	loadRules(t, "{}", `[{"name": "`+name+`", "limits": [{"count": 5, "window": 3600000000000}]}]`)
	inForce(t, name).Limiter().AllowAt("k/1", time.Now(), 1)
	for _, c := range []struct {
		method, target string
		want           int
	}{
		{http.MethodGet, "/rate_limit/", 200},
		{http.MethodGet, "/rate_limit/cluster", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys?top=3", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k%2F2", 404},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/other/k", 404},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k/1", 404},
		{http.MethodGet, "/rate_limit/rules/nope", 404},
		{http.MethodGet, "/rate_limit/rules", 404},
		{http.MethodPost, "/rate_limit/cluster", 405},
		{http.MethodDelete, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 200},
		{http.MethodDelete, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 404},
	} {
		if got := adminStatus(t, c.method, c.target); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, got, c.want)
		}
	}
}

// TestDescribeKeyScale: the key view shows the limits at the factor of the
// key's country (for an address key) and of the tier asked for.
func TestDescribeKeyScale(t *testing.T) {
	const name = "describe key scale test"
	db := filepath.Join(t.TempDir(), "country.mmdb")
	if err := mmdbtest.Write(db, map[string]string{"5.255.255.0/24": "RU"}); err != nil {
		t.Fatal(err)
	}
	loadRules(t, `{"geoip": "`+db+`"}`, `[{"name": "`+name+`", "limits": [{"count": 10, "window": 3600000000000}],
		"geo_multiplier": {"RU": 1.5, "default": 0.5}, "tiers": {"pro": ["40/1h"]}, "tier_by": "header X-Plan"}]`)
	e := inForce(t, name)
	e.Limiter().AllowAt("5.255.255.7", time.Now(), 1)
	for _, c := range []struct {
		key, tier, country string
		scale              float64
		limit              int64
	}{
		{"5.255.255.7", "", "RU", 1.5, 15},
		{"5.255.255.7", "pro", "RU", 6, 60},
		{"9.9.9.9", "", "", 0.5, 5},
		{"user-1", "pro", "", 2, 20},
	} {
		v := describeKey(e, c.key, c.tier)
		if v.Country != c.country || v.Scale != c.scale || v.Limits[0].Limit != c.limit {
			t.Errorf("%s tier %q: country %q scale %v limit %d; want %q %v %d",
				c.key, c.tier, v.Country, v.Scale, v.Limits[0].Limit, c.country, c.scale, c.limit)
		}
	}
}

// A key that is not UTF-8 text is shown percent-escaped, as the admin API
// takes it in a path, not as U+FFFD (which would hide every such key
// behind the same text).
func TestJSONKeyEscapesNonUTF8(t *testing.T) {
	for i, tc := range []struct {
		key, want string
		escaped   bool
	}{
		{"client-1", "client-1", false},
		{"ünïcode/ok", "ünïcode/ok", false},
		{"\xff\xfeab", "%FF%FEab", true},
		{"a/\x80", "a%2F%80", true},
	} {
		got, escaped := jsonKey(tc.key)
		if got != tc.want || escaped != tc.escaped {
			t.Errorf("Test %d: jsonKey(%q) = %q, %v; want %q, %v", i, tc.key, got, escaped, tc.want, tc.escaped)
		}
		if back, err := url.PathUnescape(got); tc.escaped && (err != nil || back != tc.key) {
			t.Errorf("Test %d: %q does not unescape to the key: %q, %v", i, got, back, err)
		}
	}
}
