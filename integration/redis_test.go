package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisExactConfig is a node of a fleet sharing one Redis: the rule's
// limit, 1000 an hour for every request together, is held in Redis.
// The timeout is generous and on_store_error fail_closed, so that a slow
// answer on this two-core machine shows as a 503 instead of a decision
// taken locally (which would break exactness without failing loudly).
const redisExactConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			timeout 2s
		}
	}
}

:{{.HTTP}} {
	rate_limit {
		name exact
		limit 1000 1h
		by static everyone
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestRedisExact: three Caddy processes on one Redis, 5000 requests from
// 64 concurrent connections spread over them: exactly 1000 pass.
func TestRedisExact(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	var nodes []*caddyProc
	for range 3 {
		nodes = append(nodes, startCaddy(t, redisExactConfig, "EDGELIMIT_REDIS="+srv.Addr))
	}
	const requests, workers = 5000, 64
	start := time.Now()
	tally := hammerCaddy(t, nodes, requests, workers, "/x")
	t.Logf("%d requests over %d nodes in %s: %v", requests, len(nodes), time.Since(start).Round(time.Millisecond), tally)
	if tally[200] != 1000 || tally[429] != requests-1000 || len(tally) != 2 {
		t.Errorf("statuses %v, want exactly 1000×200 and %d×429", tally, requests-1000)
	}
}

// redisDownConfig has one rule per on_store_error mode, each 5 an hour for
// every request of its path together, on Redis with the default timeout
// (50ms) and a short probe interval.
const redisDownConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			probe_interval 200ms
		}
	}
}

:{{.HTTP}} {
	rate_limit /local/* {
		name down_local
		limit 5 1h
		by static k
		store redis
		on_store_error local
	}
	rate_limit /open/* {
		name down_open
		limit 5 1h
		by static k
		store redis
		on_store_error fail_open
	}
	rate_limit /closed/* {
		name down_closed
		limit 5 1h
		by static k
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestRedisDown: with Redis killed mid-test, every request is answered
// within the timeout (no hang) as its rule's on_store_error says: local
// decides on the in-process limiter (its own 5, afresh), fail_open admits
// without headers, fail_closed answers 503 with Retry-After 1; the
// metrics count it, the log says it once, not per request. Restarted
// (empty: no persistence), Redis decides again once the probe interval
// has passed.
func TestRedisDown(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	p := startCaddy(t, redisDownConfig, "EDGELIMIT_REDIS="+srv.Addr)

	// Redis decides
	for _, path := range []string{"/local/x", "/open/x", "/closed/x"} {
		for i := range 2 {
			code, h, _ := p.get(t, path)
			if want := fmt.Sprintf(";r=%d;", 4-i); code != 200 || !strings.Contains(h.Get("RateLimit")+";", want) {
				t.Fatalf("%s with Redis up, request %d: %d, RateLimit %q; want 200 and %s", path, i+1, code, h.Get("RateLimit"), want)
			}
		}
	}
	var k adminKey
	p.adminJSON(t, "/rate_limit/rules/down_local/keys/k", &k)
	if len(k.Limits) != 1 || k.Limits[0].Used != 2 || k.Limits[0].Remaining != 3 {
		t.Errorf("admin view of the key in Redis: %+v, want 2 used, 3 remaining", k)
	}

	srv.Kill()
	var slowest time.Duration
	timed := func(path string) (int, http.Header) {
		t.Helper()
		t0 := time.Now()
		code, h, _ := p.get(t, path)
		slowest = max(slowest, time.Since(t0))
		return code, h
	}
	var local []int
	for range 8 {
		code, _ := timed("/local/x")
		local = append(local, code)
	}
	wantStatuses(t, "local with Redis down (the in-process limit, afresh)", local, seq(5, 200, 3, 429))
	for i := range 5 {
		if code, h := timed("/open/x"); code != 200 || h.Get("RateLimit") != "" {
			t.Errorf("fail_open with Redis down, request %d: %d, RateLimit %q; want 200 without", i+1, code, h.Get("RateLimit"))
		}
	}
	for i := range 5 {
		if code, h := timed("/closed/x"); code != 503 || h.Get("Retry-After") != "1" {
			t.Errorf("fail_closed with Redis down, request %d: %d, Retry-After %q; want 503 and 1", i+1, code, h.Get("Retry-After"))
		}
	}
	t.Logf("slowest request with Redis down: %s", slowest)
	if slowest >= 500*time.Millisecond {
		t.Errorf("slowest request with Redis down took %s, want < 500ms (timeout 50ms)", slowest)
	}
	if code, _ := p.admin(t, http.MethodGet, "/rate_limit/rules/down_local/keys/k", ""); code != 503 {
		t.Errorf("admin key view with Redis down: %d, want 503", code)
	}
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	for sample, want := range map[string]string{
		`caddy_rate_limit_store_fallbacks_total{mode="local",rule="down_local"}`:        "8",
		`caddy_rate_limit_store_fallbacks_total{mode="fail_open",rule="down_open"}`:     "5",
		`caddy_rate_limit_store_fallbacks_total{mode="fail_closed",rule="down_closed"}`: "5",
		`caddy_rate_limit_store_up`: "0",
	} {
		if got := metricValue(t, metrics, sample); got != want {
			t.Errorf("%s = %s, want %s", sample, got, want)
		}
	}
	errs := metricFloat(t, metrics, `caddy_rate_limit_store_errors_total{reason="timeout"}`) +
		metricFloat(t, metrics, `caddy_rate_limit_store_errors_total{reason="unavailable"}`)
	if errs < 18 || metricFloat(t, metrics, `caddy_rate_limit_store_errors_total{reason="script"}`) != 0 {
		t.Errorf("store errors: %v timeout+unavailable, want at least the 18 failed requests; metrics:\n%s", errs, grepLines(metrics, "store_"))
	}
	if n := strings.Count(p.log(), "rate limit store: redis call failed"); n == 0 || n > 6 {
		t.Errorf("%d failure log lines, want one per rule (at most one per probe interval)", n)
	}

	srv.Restart() // empty: the counters in Redis are gone
	poll := func(path string, ok func(int, http.Header) bool) http.Header {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			code, h, _ := p.get(t, path)
			if ok(code, h) {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %d (RateLimit %q) 10s after Redis came back", path, code, h.Get("RateLimit"))
			}
		}
	}
	// the local limiter is spent: a 200 comes from Redis, afresh
	h := poll("/local/x", func(code int, _ http.Header) bool { return code == 200 })
	if !strings.Contains(h.Get("RateLimit")+";", ";r=4;") {
		t.Errorf("first decision from the restarted Redis: RateLimit %q, want r=4", h.Get("RateLimit"))
	}
	poll("/closed/x", func(code int, _ http.Header) bool { return code == 200 })
	poll("/open/x", func(_ int, h http.Header) bool { return h.Get("RateLimit") != "" })
	_, metrics = p.admin(t, http.MethodGet, "/metrics", "")
	if got := metricValue(t, metrics, "caddy_rate_limit_store_up"); got != "1" {
		t.Errorf("caddy_rate_limit_store_up = %s after Redis came back, want 1", got)
	}
	if p.waitLog("redis answers again", "down_local") == "" {
		t.Error("no log line saying Redis answers again")
	}

	// the admin API resets the key in Redis (and in the fallback limiter)
	if code, body := p.admin(t, http.MethodDelete, "/rate_limit/rules/down_local/keys/k", ""); code != 200 {
		t.Errorf("DELETE the key: %d %s", code, body)
	}
	if code, _ := p.admin(t, http.MethodGet, "/rate_limit/rules/down_local/keys/k", ""); code != 404 {
		t.Errorf("GET the key after DELETE: %d, want 404", code)
	}
	if code, h, _ := p.get(t, "/local/x"); code != 200 || !strings.Contains(h.Get("RateLimit")+";", ";r=4;") {
		t.Errorf("after the reset: %d, RateLimit %q; want 200 and r=4", code, h.Get("RateLimit"))
	}

	// a reload with the same store block keeps the client; the counts are Redis's
	p.forceReload(t, redisDownConfig)
	if code, h, _ := p.get(t, "/local/x"); code != 200 || !strings.Contains(h.Get("RateLimit")+";", ";r=3;") {
		t.Errorf("after a reload: %d, RateLimit %q; want 200 and r=3", code, h.Get("RateLimit"))
	}
}

// grepLines are the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestRedisHung: a Redis that accepts connections but never answers (the
// process stopped, as a black-holed network would look) costs a request at
// most the timeout (50ms): the first requests time out, the breaker then
// fails the others fast, and the rules apply on_store_error. Continued,
// Redis decides again, with the counters it had.
func TestRedisHung(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	p := startCaddy(t, redisDownConfig, "EDGELIMIT_REDIS="+srv.Addr)
	if code := p.status(t, "/local/x"); code != 200 {
		t.Fatalf("with Redis up: %d", code)
	}
	srv.Pause()
	var slowest time.Duration
	var local []int
	for range 7 {
		t0 := time.Now()
		local = append(local, p.status(t, "/local/x"))
		slowest = max(slowest, time.Since(t0))
	}
	for range 3 {
		t0 := time.Now()
		if code := p.status(t, "/closed/x"); code != 503 {
			t.Errorf("fail_closed with Redis hung: %d, want 503", code)
		}
		slowest = max(slowest, time.Since(t0))
	}
	srv.Resume()
	t.Logf("slowest request with Redis hung: %s", slowest)
	wantStatuses(t, "local with Redis hung", local, seq(5, 200, 2, 429))
	if slowest >= 500*time.Millisecond {
		t.Errorf("slowest request with Redis hung took %s, want < 500ms (timeout 50ms)", slowest)
	}
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if n := metricFloat(t, metrics, `caddy_rate_limit_store_errors_total{reason="timeout"}`); n < 1 {
		t.Errorf("no timeout counted:\n%s", grepLines(metrics, "store_"))
	}
	// The local limiter is spent: a 200 comes from Redis, which still
	// holds the first request; the request that timed out was queued in
	// its socket and may have run when it continued (r=2), as
	// docs/operations.md says of a slow Redis.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, h, _ := p.get(t, "/local/x")
		if code == 200 {
			if rl := h.Get("RateLimit") + ";"; !strings.Contains(rl, ";r=3;") && !strings.Contains(rl, ";r=2;") {
				t.Errorf("first decision from the continued Redis: RateLimit %q, want r=3 (or r=2)", h.Get("RateLimit"))
			}
			t.Logf("first decision from the continued Redis: RateLimit %q", h.Get("RateLimit"))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/local/x: still %d 10s after Redis continued", code)
		}
	}
}
