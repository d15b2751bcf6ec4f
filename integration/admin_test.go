package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// adminCaddyfile has a rule of 5 an hour on /api/, a shadow rule on
// /shadow/, and a rule on /exempt/ that exempts 192.0.2.0/24; clients are
// set with X-Forwarded-For.
const adminCaddyfile = trustLoopback + `
:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit LIMIT 1h
	}
	rate_limit /shadow/* {
		name shadowed
		limit 1 1h
		shadow
	}
	rate_limit /exempt/* {
		name exempting
		limit 1 1h
		exempt 192.0.2.0/24
	}
	respond "ok"
}
`

func adminConfig(limit int) string {
	return strings.ReplaceAll(adminCaddyfile, "LIMIT", fmt.Sprint(limit))
}

// admin sends a request to the admin endpoint and returns the status and
// body.
func (p *caddyProc) admin(t *testing.T, method, path string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.data.Admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// adminJSON gets path from the admin endpoint, wants 200, and decodes
// the body into v.
func (p *caddyProc) adminJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body := p.admin(t, http.MethodGet, path, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// The admin API's answers, as a client reads them.
type (
	adminRequests struct {
		Allowed      uint64 `json:"allowed"`
		Denied       uint64 `json:"denied"`
		ShadowDenied uint64 `json:"shadow_denied"`
		Exempt       uint64 `json:"exempt"`
	}
	adminRule struct {
		Name      string `json:"name"`
		Algorithm string `json:"algorithm"`
		Limits    []struct {
			Count         int64   `json:"count"`
			Window        string  `json:"window"`
			WindowSeconds float64 `json:"window_seconds"`
		} `json:"limits"`
		Keys             int           `json:"keys"`
		MaxKeys          int           `json:"max_keys"`
		Evictions        uint64        `json:"evictions"`
		EvictionsLimited uint64        `json:"evictions_limited"`
		Requests         adminRequests `json:"requests"`
		Config           struct {
			Name string `json:"name"`
		} `json:"config"`
	}
	adminTop struct {
		Rule  string `json:"rule"`
		By    string `json:"by"`
		Total uint64 `json:"total"`
		Keys  []struct {
			Key   string `json:"key"`
			Count uint64 `json:"count"`
			Error uint64 `json:"error"`
		} `json:"keys"`
	}
	adminKey struct {
		Rule    string  `json:"rule"`
		Key     string  `json:"key"`
		Scale   float64 `json:"scale"`
		Allowed bool    `json:"allowed"`
		Limits  []struct {
			Limit     int64 `json:"limit"`
			Used      int64 `json:"used"`
			Remaining int64 `json:"remaining"`
		} `json:"limits"`
	}
)

// rulesByName is GET /rate_limit/, by rule name.
func (p *caddyProc) rulesByName(t *testing.T) map[string]adminRule {
	t.Helper()
	var v struct {
		Rules []adminRule `json:"rules"`
	}
	p.adminJSON(t, "/rate_limit/", &v)
	m := make(map[string]adminRule)
	for _, r := range v.Rules {
		m[r.Name] = r
	}
	return m
}

// adminTraffic is the traffic the admin tests send: on /api/, client A 7
// requests (5 pass), B 3; on /shadow/, A 3 (1 within the limit, 2 shadow
// denials); on /exempt/, an exempt client 2 and another 2 (1 denied).
func adminTraffic(t *testing.T, p *caddyProc) {
	t.Helper()
	wantStatuses(t, "api A", p.statuses(t, 7, "/api/x", xff(clientA)...), seq(5, 200, 2, 429))
	wantStatuses(t, "api B", p.statuses(t, 3, "/api/x", xff(clientB)...), seq(3, 200, 0, 0))
	wantStatuses(t, "shadow", p.statuses(t, 3, "/shadow/x", xff(clientA)...), seq(3, 200, 0, 0))
	wantStatuses(t, "exempt", p.statuses(t, 2, "/exempt/x", xff("192.0.2.77")...), seq(2, 200, 0, 0))
	wantStatuses(t, "not exempt", p.statuses(t, 2, "/exempt/x", xff(clientB)...), seq(1, 200, 1, 429))
}

const (
	clientA = "198.51.100.1"
	clientB = "198.51.100.2"
)

func TestAdminRules(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, adminConfig(5))
	adminTraffic(t, p)
	rules := p.rulesByName(t)
	for name, want := range map[string]adminRequests{
		"api":       {Allowed: 8, Denied: 2},
		"shadowed":  {Allowed: 1, ShadowDenied: 2},
		"exempting": {Allowed: 1, Denied: 1, Exempt: 2},
	} {
		r, ok := rules[name]
		if !ok {
			t.Fatalf("GET /rate_limit/: no rule %q in %v", name, rules)
		}
		if r.Requests != want {
			t.Errorf("rule %s: requests %+v, want %+v", name, r.Requests, want)
		}
	}
	api := rules["api"]
	if api.Keys != 2 || api.MaxKeys != 1_000_000 || api.Evictions != 0 || api.Algorithm != "sliding_window" ||
		len(api.Limits) != 1 || api.Limits[0].Count != 5 || api.Limits[0].Window != "1h" || api.Limits[0].WindowSeconds != 3600 ||
		api.Config.Name != "api" {
		t.Errorf("rule api: %+v", api)
	}
	var one adminRule
	p.adminJSON(t, "/rate_limit/rules/api", &one)
	if one.Name != "api" || one.Requests != rules["api"].Requests {
		t.Errorf("GET /rate_limit/rules/api: %+v", one)
	}
}

func TestAdminTopKeys(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, adminConfig(5))
	adminTraffic(t, p)
	var top adminTop
	p.adminJSON(t, "/rate_limit/rules/api/keys", &top)
	got := fmt.Sprint(top.Keys)
	if top.By != "requests" || top.Total != 10 || got != fmt.Sprintf("[{%s 7 0} {%s 3 0}]", clientA, clientB) {
		t.Errorf("busiest keys: %+v", top)
	}
	p.adminJSON(t, "/rate_limit/rules/api/keys?top=1&by=denied", &top)
	if got := fmt.Sprint(top.Keys); top.By != "denied" || top.Total != 2 || got != fmt.Sprintf("[{%s 2 0}]", clientA) {
		t.Errorf("most-denied keys: %+v", top)
	}
	for _, q := range []string{"top=0", "top=x", "top=1001", "by=bytes"} {
		if code, body := p.admin(t, http.MethodGet, "/rate_limit/rules/api/keys?"+q, ""); code != 400 {
			t.Errorf("?%s: %d %s, want 400", q, code, body)
		}
	}
}

func TestAdminKeyAndReset(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, adminConfig(5))
	adminTraffic(t, p)
	var k adminKey
	p.adminJSON(t, "/rate_limit/rules/api/keys/"+url.PathEscape(clientA), &k)
	if k.Rule != "api" || k.Key != clientA || k.Allowed || k.Scale != 1 || len(k.Limits) != 1 ||
		k.Limits[0].Limit != 5 || k.Limits[0].Used != 5 || k.Limits[0].Remaining != 0 {
		t.Errorf("key A: %+v", k)
	}
	p.adminJSON(t, "/rate_limit/rules/api/keys/"+url.PathEscape(clientB), &k)
	if !k.Allowed || k.Limits[0].Used != 3 || k.Limits[0].Remaining != 2 {
		t.Errorf("key B: %+v", k)
	}

	if code, body := p.admin(t, http.MethodDelete, "/rate_limit/rules/api/keys/"+url.PathEscape(clientA), ""); code != 200 {
		t.Fatalf("DELETE key A: %d %s", code, body)
	}
	wantStatuses(t, "A after the reset", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	var top adminTop
	p.adminJSON(t, "/rate_limit/rules/api/keys?by=denied", &top)
	if got := fmt.Sprint(top.Keys); got != fmt.Sprintf("[{%s 1 0}]", clientA) {
		t.Errorf("most-denied after the reset: %s, want A with the 1 denial since", got)
	}

	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/rate_limit/rules/api/keys/203.0.113.99", 404},
		{http.MethodDelete, "/rate_limit/rules/api/keys/203.0.113.99", 404},
		{http.MethodGet, "/rate_limit/rules/nope", 404},
		{http.MethodGet, "/rate_limit/rules/nope/keys", 404},
		{http.MethodGet, "/rate_limit/elsewhere", 404},
		{http.MethodPost, "/rate_limit/", 405},
		{http.MethodDelete, "/rate_limit/rules/api", 405},
		{http.MethodPut, "/rate_limit/rules/api/keys/" + clientB, 405},
	} {
		code, body := p.admin(t, c.method, c.path, "")
		if code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
		if !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: body %s, want a JSON error", c.method, c.path, body)
		}
	}
}

// TestAdminEscapedKey: a key holding a slash (an IP prefix) is one path
// segment when percent-encoded.
func TestAdminEscapedKey(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit {
		name nets
		limit 5 1h
		by ip/24
	}
	respond "ok"
}
`)
	p.statuses(t, 2, "/", xff("198.51.100.7")...)
	var k adminKey
	p.adminJSON(t, "/rate_limit/rules/nets/keys/"+url.PathEscape("198.51.100.0/24"), &k)
	if k.Key != "198.51.100.0/24" || k.Limits[0].Used != 2 {
		t.Errorf("prefix key: %+v", k)
	}
}

// metricValue finds a sample's value in a Prometheus text exposition.
func metricValue(t *testing.T, exposition, sample string) string {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return "absent"
}

// TestMetricsAcrossReloads: /metrics counts the requests sent, and keeps
// counting (no reset, no duplicate registration) across two reloads.
func TestMetricsAcrossReloads(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, adminConfig(5))
	adminTraffic(t, p)
	check := func(when string, want map[string]string) {
		t.Helper()
		code, body := p.admin(t, http.MethodGet, "/metrics", "")
		if code != 200 {
			t.Fatalf("%s: GET /metrics: %d", when, code)
		}
		for sample, v := range want {
			if got := metricValue(t, body, sample); got != v {
				t.Errorf("%s: %s = %s, want %s", when, sample, got, v)
			}
		}
		if strings.Contains(body, clientA) {
			t.Errorf("%s: a client address is in the metrics", when)
		}
	}
	check("before reloads", map[string]string{
		`caddy_rate_limit_requests_total{decision="allowed",rule="api"}`:            "8",
		`caddy_rate_limit_requests_total{decision="denied",rule="api"}`:             "2",
		`caddy_rate_limit_requests_total{decision="shadow_denied",rule="shadowed"}`: "2",
		`caddy_rate_limit_requests_total{decision="exempt",rule="exempting"}`:       "2",
		`caddy_rate_limit_keys{rule="api"}`:                                         "2",
		`caddy_rate_limit_evictions_total{rule="api",state="limited"}`:              "0",
		`caddy_rate_limit_evictions_total{rule="api",state="under_limit"}`:          "0",
	})
	p.reload(t, adminConfig(6))
	wantStatuses(t, "A after limit 6", p.statuses(t, 2, "/api/x", xff(clientA)...), seq(1, 200, 1, 429))
	p.reload(t, adminConfig(7))
	wantStatuses(t, "A after limit 7", p.statuses(t, 2, "/api/x", xff(clientA)...), seq(1, 200, 1, 429))
	check("after two reloads", map[string]string{
		`caddy_rate_limit_requests_total{decision="allowed",rule="api"}`:      "10",
		`caddy_rate_limit_requests_total{decision="denied",rule="api"}`:       "4",
		`caddy_rate_limit_requests_total{decision="exempt",rule="exempting"}`: "2",
		`caddy_rate_limit_keys{rule="api"}`:                                   "2",
	})
	if code, body := p.admin(t, http.MethodGet, "/metrics", ""); code != 200 || !strings.Contains(body, "caddy_rate_limit_decision_seconds_count") {
		t.Errorf("GET /metrics: %d, no decision_seconds histogram", code)
	}
	if log := p.log(); strings.Contains(log, "duplicate metrics collector registration") {
		t.Errorf("duplicate registration in the log")
	}
}

// TestConfigPatchKeepsCounters: changing a rule's limit through Caddy's
// /config/ API takes effect at once and keeps the counters.
func TestConfigPatchKeepsCounters(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, adminConfig(5))
	wantStatuses(t, "A at limit 5", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))

	var cfg any
	p.adminJSON(t, "/config/", &cfg)
	path, ok := findRule(cfg, "/config", "api")
	if !ok {
		t.Fatal("rule api not found in /config/")
	}
	code, body := p.admin(t, http.MethodPatch, path+"/limits/0/count", "8")
	if code != 200 {
		t.Fatalf("PATCH %s/limits/0/count: %d %s", path, code, body)
	}
	p.client.CloseIdleConnections()
	p.reloaded = true
	wantStatuses(t, "A at limit 8", p.statuses(t, 4, "/api/x", xff(clientA)...), seq(3, 200, 1, 429))
	var r adminRule
	p.adminJSON(t, "/rate_limit/rules/api", &r)
	if r.Limits[0].Count != 8 {
		t.Errorf("after the PATCH: limit %d in force, want 8", r.Limits[0].Count)
	}
}

// findRule finds the rule named name in a config's JSON and returns its
// /config/ path.
func findRule(v any, path, name string) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		if v["name"] == name {
			if _, ok := v["limits"]; ok {
				return path, true
			}
		}
		for k, x := range v {
			if p, ok := findRule(x, path+"/"+k, name); ok {
				return p, true
			}
		}
	case []any:
		for i, x := range v {
			if p, ok := findRule(x, fmt.Sprintf("%s/%d", path, i), name); ok {
				return p, true
			}
		}
	}
	return "", false
}
