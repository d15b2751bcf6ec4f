package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUIRoutes: the site handler serves the page at any path of its
// route, its files and the API by query, and refuses writes without write.
func TestUIRoutes(t *testing.T) {
	for i, tc := range []struct {
		write          bool
		method, target string
		status         int
		body           string // a part of the body
	}{
		{method: "GET", target: "/rate-limits/", status: 200, body: `<html lang="en" data-site>`},
		{write: true, method: "GET", target: "/rate-limits/", status: 200, body: `<html lang="en" data-site data-write>`},
		{method: "PUT", target: "/x/?api=rules/none/keys/k/override", status: 403, body: "resets and overrides need rate_limit_ui write"},
		{method: "GET", target: "/rate-limits/anything", status: 200, body: `<script src="?file=app.js"`},
		{method: "GET", target: "/x/?file=app.js", status: 200, body: `"use strict"`},
		{method: "GET", target: "/x/?file=app.css", status: 200, body: ":root"},
		{method: "GET", target: "/x/?file=index.html", status: 404, body: `"error"`},
		{method: "GET", target: "/x/?file=nope.js", status: 404},
		{method: "POST", target: "/x/", status: 405},
		{method: "GET", target: "/x/?api=", status: 200, body: `"rules"`},
		{method: "GET", target: "/x/?api=rules/no%2520such", status: 404, body: `no rule named \"no such\"`},
		{method: "GET", target: "/x/?api=" + "rules%2Fnone%2Fkeys%3Ftop%3D5", status: 404, body: `no rule named \"none\"`},
		{method: "DELETE", target: "/x/?api=rules/none/keys/k", status: 403, body: "read-only"},
		{write: true, method: "DELETE", target: "/x/?api=rules/none/keys/k", status: 404, body: "no rule named"},
		{method: "GET", target: "/x/?config=", status: 403, body: "read-only"},
		{method: "PATCH", target: "/x/?config=apps/http", status: 403, body: "read-only"},
	} {
		u := &UI{Write: tc.write}
		w := httptest.NewRecorder()
		if err := u.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil), nil); err != nil {
			t.Errorf("Test %d: %s %s: %v", i, tc.method, tc.target, err)
			continue
		}
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("Test %d: %s %s: %d %.200q, want %d and %q", i, tc.method, tc.target, w.Code, w.Body, tc.status, tc.body)
		}
	}
}

// TestUIForeignWrites: a write is refused when a browser says it comes
// from another site (Sec-Fetch-Site cross-site or same-site) or from
// another origin; the site's own page, a client that is not a browser,
// and reads pass. httptest's requests come to http://example.com.
func TestUIForeignWrites(t *testing.T) {
	for i, tc := range []struct {
		method  string
		tls     bool
		headers []string
		status  int
	}{
		{"DELETE", false, nil, 404},
		{"DELETE", false, []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://example.com"}, 404},
		{"DELETE", false, []string{"Sec-Fetch-Site", "none"}, 404},
		{"DELETE", false, []string{"Origin", "http://EXAMPLE.com:80"}, 404},
		{"DELETE", false, []string{"Origin", "https://example.com"}, 404}, // a proxy in front ends TLS
		{"DELETE", true, []string{"Origin", "https://example.com:443"}, 404},
		{"DELETE", false, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"DELETE", false, []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"DELETE", false, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://example.com"}, 403},
		{"DELETE", false, []string{"Origin", "http://evil.example"}, 403},
		{"DELETE", false, []string{"Origin", "http://example.com.evil.example"}, 403},
		{"DELETE", false, []string{"Origin", "http://example.com:8080"}, 403},
		{"DELETE", false, []string{"Origin", "null"}, 403},
		{"DELETE", false, []string{"Origin", ""}, 403},
		{"DELETE", false, []string{"Origin", "http://example.com", "Origin", "http://evil.example"}, 403},
		{"DELETE", true, []string{"Origin", "http://example.com"}, 403}, // http never writes to https
		{"PATCH", false, []string{"Origin", "http://evil.example"}, 403},
		{"POST", false, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"GET", false, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 200},
	} {
		target := "/x/?api=rules/none/keys/k"
		if tc.method == "GET" {
			target = "/x/?api="
		}
		r := httptest.NewRequest(tc.method, target, nil)
		if tc.tls {
			r = httptest.NewRequest(tc.method, "https://example.com"+target, nil)
		}
		for j := 0; j+1 < len(tc.headers); j += 2 {
			r.Header.Add(tc.headers[j], tc.headers[j+1])
		}
		w := httptest.NewRecorder()
		if err := (&UI{Write: true}).ServeHTTP(w, r, nil); err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		if w.Code != tc.status {
			t.Errorf("Test %d: %s %q: %d %s, want %d", i, tc.method, tc.headers, w.Code, w.Body, tc.status)
		}
	}
}

// TestUIConfigView: the config a site's page reads holds the rate_limit
// handlers' rules alone, at the paths they have in the whole config; only
// such a rule's path may be changed.
func TestUIConfigView(t *testing.T) {
	var cfg any
	full := `{"admin": {"listen": "localhost:2019"}, "apps": {"http": {"servers": {"s": {"routes": [
		{"handle": [{"handler": "basic_auth", "accounts": [{"username": "a", "password": "secret"}]}]},
		{"handle": [{"handler": "rate_limit", "rules": [{"name": "api", "limits": [{"count": 5, "window": 60000000000}]}], "rules_file": "/x"}]}
	]}}}, "rate_limit": {"cluster": {"secret_keys": ["k"]}}}}`
	if err := json.Unmarshal([]byte(full), &cfg); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(rulesOnly(cfg))
	want := `{"apps":{"http":{"servers":{"s":{"routes":[null,{"handle":[{"handler":"rate_limit","rules":[{"limits":[{"count":5,"window":60000000000}],"name":"api"}]}]}]}}}}}`
	if string(got) != want {
		t.Errorf("view:\n%s\nwant\n%s", got, want)
	}
	for i, tc := range []struct {
		path string
		ok   bool
	}{
		{"apps/http/servers/s/routes/1/handle/0/rules/0", true},
		{"apps/http/servers/s/routes/1/handle/0/rules/1", false},
		{"apps/http/servers/s/routes/1/handle/0/rules/00", false},
		{"apps/http/servers/s/routes/0/handle/0/accounts/0", false},
		{"apps/http/servers/s/routes/1/handle/0", false},
		{"apps/rate_limit/cluster", false},
		{"", false},
	} {
		if got := isRulePath(cfg, strings.Split(tc.path, "/")); got != tc.ok {
			t.Errorf("Test %d: %s: %v, want %v", i, tc.path, got, tc.ok)
		}
	}
}
