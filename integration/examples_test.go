package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startExample runs caddyfile_examples/name: the test's global options go
// into the example's global block (or a new one), and EDGELIMIT_PORT, which
// the examples' site addresses use, is the test's HTTP port. Requests are
// sent with Host: localhost:PORT, as curl would for the examples' site.
func startExample(t *testing.T, name string, env ...string) *caddyProc {
	t.Helper()
	return startExampleAt(t, loopback, name, env...)
}

// startExampleAt is startExample at a place.
func startExampleAt(t *testing.T, at place, name string, env ...string) *caddyProc {
	t.Helper()
	needCaddy(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "caddyfile_examples", name))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if strings.Contains(text, "{{") {
		t.Fatalf("%s: contains {{, which the test's template would read", name)
	}
	if !strings.Contains(text, "http://localhost:{$EDGELIMIT_PORT:8080}") {
		t.Fatalf("%s: its site address is not http://localhost:{$EDGELIMIT_PORT:8080}", name)
	}
	p := startCaddyAt(t, at, withGlobals(text), env...)
	p.host = fmt.Sprintf("localhost:%d", p.data.HTTP)
	return p
}

// withGlobals puts {{.Global}} into a Caddyfile's global options block,
// adding the block if it has none.
func withGlobals(caddyfile string) string {
	lines := strings.Split(caddyfile, "\n")
	for i, line := range lines {
		s := strings.TrimSpace(line)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if s == "{" {
			return strings.Join(lines[:i+1], "\n") + "\n\t{{.Global}}\n" + strings.Join(lines[i+1:], "\n")
		}
		break
	}
	return plainGlobals + caddyfile
}

// TestExamplesHaveTests checks that every example is started by a test
// of this package (startExample): a new example needs a test.
func TestExamplesHaveTests(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "caddyfile_examples", "*.Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	if len(files) == 0 {
		t.Fatal("no caddyfile_examples/*.Caddyfile")
	}
	for _, f := range files {
		if !strings.Contains(string(src), `startExample(t, "`+filepath.Base(f)+`"`) {
			t.Errorf("%s has no test (startExample) in integration/", filepath.Base(f))
		}
	}
}

func TestExampleQuickstart(t *testing.T) {
	t.Parallel()
	p := startExample(t, "quickstart.Caddyfile")
	code, _, body := p.get(t, "/")
	if code != 200 || !strings.Contains(body, "curl") || !strings.Contains(body, fmt.Sprintf("http://localhost:%d/api/hello", p.data.HTTP)) {
		t.Errorf("/: %d %q, want 200 and instructions with curl and this server's address", code, body)
	}
	if got := count(t, 7, func() int { return p.status(t, "/") }); fmt.Sprint(got) != "map[200:7]" {
		t.Errorf("/ is not limited: statuses %v, want 7×200", got)
	}
	code, h, body := p.get(t, "/api/hello")
	if code != 200 || body != "Hello from the API (/api/hello)." {
		t.Errorf("/api/hello: %d %q", code, body)
	}
	if got, want := h.Get("RateLimit-Policy"), `"api";q=5;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if _, r, _ := parseRateLimit(t, h.Get("RateLimit")); r != 4 {
		t.Errorf("RateLimit %q, want r=4", h.Get("RateLimit"))
	}
	if got := h.Get("X-RateLimit-Remaining"); got != "4" {
		t.Errorf("X-RateLimit-Remaining %q, want 4", got)
	}
	wantStatuses(t, "/api/*", p.statuses(t, 5, "/api/hello"), seq(4, 200, 1, 429))
	// Draft-11 §6: the 429's Retry-After is the end of the effective
	// window t, the time the next request frees up (a cost of 1: the same).
	code, h, _ = p.get(t, "/api/hello")
	_, r, tt := parseRateLimit(t, h.Get("RateLimit"))
	if code != 429 || r != 0 || strconv.FormatInt(tt, 10) != h.Get("Retry-After") {
		t.Errorf("7th /api/hello: %d, RateLimit %q, Retry-After %q; want 429, r=0 and Retry-After = t", code, h.Get("RateLimit"), h.Get("Retry-After"))
	}
}

func TestExampleAlgorithms(t *testing.T) {
	t.Parallel()
	p := startExample(t, "algorithms.Caddyfile")
	for _, algo := range []string{"sliding_window", "fixed_window", "sliding_log", "token_bucket"} {
		wantStatuses(t, algo, p.statuses(t, 5, "/"+algo+"/x"), seq(3, 200, 2, 429))
	}
	// The leaky bucket holds requests instead: 3 in a row are all served,
	// 200 ms apart.
	start := time.Now()
	wantStatuses(t, "leaky_bucket", p.statuses(t, 3, "/leaky_bucket/x"), seq(3, 200, 0, 0))
	if took := time.Since(start); took < 350*time.Millisecond {
		t.Errorf("leaky_bucket: 3 requests took %v, want ≥ 400ms (paced 200 ms apart)", took)
	}
	if code, _, body := p.get(t, "/other"); code != 200 || body != "/other: served" {
		t.Errorf("/other: %d %q", code, body)
	}
}

func TestExampleBurst(t *testing.T) {
	t.Parallel()
	p := startExample(t, "burst.Caddyfile")
	wantStatuses(t, "/api", p.statuses(t, 5, "/api/x"), seq(3, 200, 2, 429))
	wantStatuses(t, "/upload", p.statuses(t, 7, "/upload/x"), seq(5, 200, 2, 429))
}

func TestExampleMultiLimit(t *testing.T) {
	t.Parallel()
	p := startExample(t, "multi_limit.Caddyfile")
	code, h, _ := p.get(t, "/api/")
	if code != 200 {
		t.Errorf("first request: status %d", code)
	}
	if got, want := h.Get("RateLimit-Policy"), `"api-1s";q=3;w=1, "api-1d";q=5;w=86400`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := h.Get("RateLimit"), `"api-1s";r=2;t=1, "api-1d";r=4;t=86400`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	wantStatuses(t, "the second's limit", p.statuses(t, 3, "/api/"), seq(2, 200, 1, 429))
	time.Sleep(time.Second) // the second's limit frees its 3 requests
	// The day has 2 left: the second's denial above took nothing from it.
	wantStatuses(t, "the day's limit", p.statuses(t, 3, "/api/"), seq(2, 200, 1, 429))
}

func TestExampleKeys(t *testing.T) {
	t.Parallel()
	p := startExample(t, "keys.Caddyfile")
	for i, tc := range []struct {
		path    string
		headers []string
		want    []int
	}{
		{"/keys/x", nil, seq(0, 0, 2, 403)},
		{"/keys/x", []string{"X-API-Key", "a"}, seq(3, 200, 1, 429)},
		{"/keys/x", []string{"X-API-Key", "b"}, seq(3, 200, 1, 429)},
		{"/subnet/x", xff("192.0.2.1"), seq(2, 200, 0, 0)},
		{"/subnet/x", xff("192.0.2.200"), seq(1, 200, 1, 429)}, // same /24
		{"/subnet/x", xff("198.51.100.1"), seq(3, 200, 1, 429)},
		{"/subnet/x", xff("2001:db8:1:2::1"), seq(2, 200, 0, 0)},
		{"/subnet/x", xff("2001:db8:1:2::ffff"), seq(1, 200, 1, 429)}, // same /64
		{"/subnet/x", xff("2001:db8:1:3::1"), seq(3, 200, 1, 429)},
		{"/composite/x", []string{"X-API-Key", "a", "X-Forwarded-For", "192.0.2.1"}, seq(3, 200, 1, 429)},
		{"/composite/x", []string{"X-API-Key", "a", "X-Forwarded-For", "192.0.2.2"}, seq(3, 200, 1, 429)},
		{"/composite/x", []string{"X-API-Key", "b", "X-Forwarded-For", "192.0.2.1"}, seq(3, 200, 1, 429)},
		{"/tenant/x?tenant=acme", nil, seq(3, 200, 1, 429)},
		{"/tenant/x?tenant=initech", nil, seq(3, 200, 1, 429)},
	} {
		wantStatuses(t, fmt.Sprintf("Test %d: %s %q", i, tc.path, tc.headers), p.statuses(t, len(tc.want), tc.path, tc.headers...), tc.want)
	}
}

func TestExampleShadow(t *testing.T) {
	t.Parallel()
	p := startExample(t, "shadow.Caddyfile")
	for k := 1; k <= 4; k++ {
		code, h, _ := p.get(t, "/api/x")
		if code != 200 {
			t.Errorf("request %d: status %d, want 200", k, code)
		}
		if _, r, _ := parseRateLimit(t, h.Get("RateLimit")); r != int64(max(2-k, 0)) {
			t.Errorf("request %d: RateLimit %q, want r=%d", k, h.Get("RateLimit"), max(2-k, 0))
		}
	}
}

func TestExampleExempt(t *testing.T) {
	t.Parallel()
	p := startExample(t, "exempt.Caddyfile")
	for _, client := range []string{"10.1.2.3", "203.0.113.10", "2001:db8:cafe:1::1"} {
		wantStatuses(t, client, p.statuses(t, 4, "/", xff(client)...), seq(4, 200, 0, 0))
	}
	for _, client := range []string{"192.0.2.1", "203.0.113.11"} {
		wantStatuses(t, client, p.statuses(t, 4, "/", xff(client)...), seq(2, 200, 2, 429))
	}
}

func TestExampleErrorPage(t *testing.T) {
	t.Parallel()
	p := startExample(t, "error_page.Caddyfile")
	wantStatuses(t, "within the limit", p.statuses(t, 2, "/"), seq(2, 200, 0, 0))
	code, h, body := p.get(t, "/")
	if code != 429 {
		t.Errorf("third request: status %d, want 429", code)
	}
	wantRetryAfter(t, "third request", h, 120)
	want := "<p>Limit site: please try again in " + h.Get("Retry-After") + " seconds.</p>"
	if !strings.Contains(body, want) || !strings.HasPrefix(body, "<!doctype html>") {
		t.Errorf("third request: body %q, want an HTML page with %q", body, want)
	}
	if ct := h.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("third request: Content-Type %q", ct)
	}
}

func TestExampleProblemJSON(t *testing.T) {
	t.Parallel()
	p := startExample(t, "problem_json.Caddyfile")
	wantStatuses(t, "within the limit", p.statuses(t, 2, "/api/x"), seq(2, 200, 0, 0))
	code, h, body := p.get(t, "/api/x")
	if code != 429 || h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("third request: %d, Content-Type %q; want 429, application/problem+json", code, h.Get("Content-Type"))
	}
	var prob map[string]any
	if err := json.Unmarshal([]byte(body), &prob); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if prob["type"] != "https://iana.org/assignments/http-problem-types#quota-exceeded" || prob["status"] != 429.0 || fmt.Sprint(prob["violated-policies"]) != "[api]" {
		t.Errorf("body %s", body)
	}
	if code := p.status(t, "/other"); code != 200 {
		t.Errorf("/other: status %d, want 200 (not limited)", code)
	}
}

func TestExampleLeakyBucket(t *testing.T) {
	t.Parallel()
	p := startExample(t, "leaky_bucket.Caddyfile")
	tally, slowest := burst(t, p, 4, "/api/x", "")
	if fmt.Sprint(tally) != fmt.Sprint(map[int]int{200: 4}) || slowest < 250*time.Millisecond {
		t.Errorf("4 at once: %v, the last after %v; want all 200, the last after ≥ 300ms", tally, slowest)
	}
	time.Sleep(400 * time.Millisecond) // let the queue drain, so the next burst starts empty
	tally, _ = burst(t, p, 20, "/api/x", "")
	if want := map[int]int{200: 6, 429: 14}; fmt.Sprint(tally) != fmt.Sprint(want) {
		t.Errorf("20 at once: %v, want %v", tally, want)
	}
}

func TestExampleCaddyRateLimitCompat(t *testing.T) {
	t.Parallel()
	p := startExample(t, "caddy_ratelimit_compat.Caddyfile")
	// dynamic_example: 2 per 5 s per client address.
	wantStatuses(t, "dynamic_example", p.statuses(t, 3, "/"), seq(2, 200, 1, 429))
	code, h, _ := p.get(t, "/")
	if code != 429 {
		t.Errorf("fourth request: status %d, want 429", code)
	}
	wantRetryAfter(t, "fourth request", h, 5)
}

func TestExampleGeo(t *testing.T) {
	t.Parallel()
	p := startExample(t, "geo.Caddyfile")
	for i, c := range []struct {
		country string
		want    int
	}{{"RU", 15}, {"US", 10}, {"FR", 5}, {"", 5}} {
		headers := xff(fmt.Sprintf("5.255.255.%d", i+1))
		if c.country != "" {
			headers = append(headers, "CF-IPCountry", c.country)
		}
		wantStatuses(t, "country "+c.country, p.statuses(t, c.want+2, "/api/public/x", headers...), seq(c.want, 200, 2, 429))
	}
	_, h, body := p.get(t, "/api/public/x", "CF-IPCountry", "ru", "X-Forwarded-For", "5.255.255.100")
	if want := `"public";q=15;w=60`; h.Get("RateLimit-Policy") != want || body != "Hello, client from RU." {
		t.Errorf("RU: RateLimit-Policy %q, body %q; want %q, %q", h.Get("RateLimit-Policy"), body, want, "Hello, client from RU.")
	}
}

func TestExampleRulesFile(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := startExample(t, "rules_file.Caddyfile", "EDGELIMIT_RULES="+filepath.Join(root, "caddyfile_examples", "edgebyte_rules.yaml"))
	wantStatuses(t, "alice", p.statuses(t, 22, "/api/v1/orders", basicAuth("alice")...), seq(20, 200, 2, 429))
	if code, _, body := p.get(t, "/api/v1/orders", basicAuth("bob")...); code != 200 || body != "Hello, bob." {
		t.Errorf("bob: %d %q", code, body)
	}
	if code, _, _ := p.get(t, "/api/v1/orders"); code != 401 {
		t.Errorf("no credentials: %d, want 401", code)
	}
	_, h, body := p.get(t, "/api/public/x", "CF-IPCountry", "RU")
	if !strings.HasSuffix(h.Get("RateLimit-Policy"), ` /api/public/* by ip";q=1500;w=60`) {
		t.Errorf("public from RU: RateLimit-Policy %q", h.Get("RateLimit-Policy"))
	}
	if body != "Hello, client from RU." {
		t.Errorf("public from RU: body %q", body)
	}
	wantStatuses(t, "login", p.statuses(t, 6, "/login"), seq(5, 200, 1, 429))
}
