package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The configs of mholt/caddy-ratelimit's own tests (handler_test.go of
// v0.1.0: TestRateLimits, TestDistinctZonesAndKeys) and of its README,
// loaded as JSON through the admin endpoint's /load: the handler objects
// are the peer's, unchanged; only the admin and listen addresses are the
// test's. What they assert is asserted here where time is not mocked.

// peerJSON is a whole JSON config around one route's handlers (a JSON
// array), listening on p's port, its admin and storage the test's.
func peerJSON(p *caddyProc, handlers string) string {
	return fmt.Sprintf(`{
	"admin": {"listen": %q, "config": {"persist": false}},
	"storage": {"module": "file_system", "root": %q},
	"apps": {
		"http": {
			"servers": {
				"demo": {
					"listen": [":%d"],
					"routes": [{"handle": %s}]
				}
			}
		}
	}
}`, p.data.Admin, p.data.Storage, p.data.HTTP, handlers)
}

// startPeer starts a Caddy and loads the peer's handlers into it.
func startPeer(t *testing.T, handlers string) *caddyProc {
	t.Helper()
	p := startCaddy(t, plainGlobals+":{{.HTTP}} {\n\trespond \"before\"\n}\n")
	p.load(t, "application/json", peerJSON(p, handlers))
	p.client.CloseIdleConnections()
	p.reloaded = true
	return p
}

// do sends a request of method to path and returns its status and headers.
func (p *caddyProc) do(t *testing.T, method, path string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, p.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.send(t, req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// methodStatuses sends n requests of method to path, one after the other,
// and returns their statuses.
func (p *caddyProc) methodStatuses(t *testing.T, n int, method, path string) []int {
	t.Helper()
	got := make([]int, n)
	for i := range got {
		got[i], _ = p.do(t, method, path)
	}
	return got
}

// TestPeerRateLimits is the peer's TestRateLimits: zone1, GET requests,
// static key, 10 per 60s: 10 × 200, then 429 with Retry-After 60 (the
// peer freezes its clock; the 11 requests here take well under a second,
// so the oldest expires in just under 60s, rounded up to 60).
func TestPeerRateLimits(t *testing.T) {
	t.Parallel()
	p := startPeer(t, `[
		{
			"handler": "rate_limit",
			"rate_limits": {
				"zone1": {
					"match": [{"method": ["GET"]}],
					"key": "static",
					"window": "60s",
					"max_events": 10
				}
			}
		},
		{
			"handler": "static_response",
			"status_code": 200
		}
	]`)
	wantStatuses(t, "zone1", p.methodStatuses(t, 10, http.MethodGet, "/"), seq(10, 200, 0, 0))
	if code, h := p.do(t, http.MethodGet, "/"); code != 429 || h.Get("Retry-After") != "60" {
		t.Errorf("11th: %d, Retry-After %q; want 429, 60", code, h.Get("Retry-After"))
	}
	// The zone matches GET only: other methods pass.
	if code, _ := p.do(t, http.MethodPost, "/"); code != 200 {
		t.Errorf("POST: %d, want 200 (zone1 matches GET)", code)
	}
}

// TestPeerDistinctZonesAndKeys is the peer's TestDistinctZonesAndKeys:
// zones by method (GET, DELETE), keys by path, 10 per 60s each, all four
// counted independently.
func TestPeerDistinctZonesAndKeys(t *testing.T) {
	t.Parallel()
	p := startPeer(t, `[
		{
			"handler": "rate_limit",
			"rate_limits": {
				"zone1": {
					"match": [{"method": ["GET"]}],
					"key": "{http.request.orig_uri.path}",
					"window": "60s",
					"max_events": 10
				},
				"zone2": {
					"match": [{"method": ["DELETE"]}],
					"key": "{http.request.orig_uri.path}",
					"window": "60s",
					"max_events": 10
				}
			}
		},
		{
			"handler": "static_response",
			"status_code": 200
		}
	]`)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		for _, path := range []string{"/path1", "/path2"} {
			wantStatuses(t, method+" "+path, p.methodStatuses(t, 11, method, path), seq(10, 200, 1, 429))
		}
	}
}

// TestPeerReadmeJSON is the JSON example of the peer's README:
// static_example (100 GET a minute for everyone), dynamic_example (2 per
// 5s per client address), distributed (ignored, with a warning), log_key.
func TestPeerReadmeJSON(t *testing.T) {
	t.Parallel()
	p := startPeer(t, `[
		{
			"handler": "rate_limit",
			"rate_limits": {
				"static_example": {
					"match": [
						{"method": ["GET"]}
					],
					"key": "static",
					"window": "1m",
					"max_events": 100
				},
				"dynamic_example": {
					"key": "{http.request.remote.host}",
					"window": "5s",
					"max_events": 2
				}
			},
			"distributed": {},
			"log_key": true
		},
		{
			"handler": "static_response",
			"body": "I'm behind the rate limiter!"
		}
	]`)
	wantStatuses(t, "dynamic_example", p.statuses(t, 3, "/"), seq(2, 200, 1, 429))
	code, h, _ := p.get(t, "/")
	if code != 429 {
		t.Errorf("fourth request: %d, want 429", code)
	}
	wantRetryAfter(t, "fourth request", h, 5)
	if log := p.waitLog("distributed rate limiting is not supported", `"field":"distributed"`); log == "" {
		t.Error("no warning that distributed is ignored")
	}
	// log_key: the denial's log line has the key
	if log := p.waitLog(`"key":"127.0.0.1"`); log == "" {
		t.Error("log_key: no denial log line with the key")
	}
}

// TestPeerExceededName: a handle_errors page written for the peer renders
// {http.rate_limit.exceeded.name}, the zone that denied; disable_metrics
// (handler-level, as the peer's) keeps the zone's series out of /metrics;
// ipv4_prefix on a key that is not {remote_host} masks it, as the peer
// does.
func TestPeerExceededName(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		zone by_header {
			key {http.request.header.X-IP}
			ipv4_prefix 24
			events 2
			window 1m
		}
		disable_metrics
	}
	respond "ok"
	handle_errors 429 {
		respond "limited by {http.rate_limit.exceeded.name}" 429
	}
}
`)
	// three addresses of one /24 share a counter; another /24 has its own
	got := []int{
		p.status(t, "/", "X-IP", "192.0.2.1"),
		p.status(t, "/", "X-IP", "192.0.2.2"),
		p.status(t, "/", "X-IP", "192.0.2.3"),
		p.status(t, "/", "X-IP", "198.51.100.1"),
	}
	wantStatuses(t, "X-IP in 192.0.2.0/24, then 198.51.100.1", got, []int{200, 200, 429, 200})
	code, _, body := p.get(t, "/", "X-IP", "192.0.2.9")
	if code != 429 || body != "limited by by_header" {
		t.Errorf("denied: %d %q, want 429 %q", code, body, "limited by by_header")
	}
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if strings.Contains(metrics, `rule="by_header"`) {
		t.Errorf("disable_metrics: the zone's series are exported")
	}
}

// TestPeerCaddyfileRateLimits is the peer's TestCaddyfileRateLimits: the
// Caddyfile form of TestRateLimits, and a POST (not matched) passes.
func TestPeerCaddyfileRateLimits(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		zone zone1 {
			match {
				method GET
			}
			key static
			window 60s
			events 10
		}
	}

	respond 200
}
`)
	wantStatuses(t, "zone1", p.methodStatuses(t, 10, http.MethodGet, "/"), seq(10, 200, 0, 0))
	if code, h := p.do(t, http.MethodGet, "/"); code != 429 || h.Get("Retry-After") != "60" {
		t.Errorf("11th: %d, Retry-After %q; want 429, 60", code, h.Get("Retry-After"))
	}
	if code, _ := p.do(t, http.MethodPost, "/"); code != 200 {
		t.Errorf("POST: %d, want 200", code)
	}
}
