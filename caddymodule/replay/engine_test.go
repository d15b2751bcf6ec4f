package replay

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/edgebyte/edgelimit/caddymodule/adapt"
	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
)

// load provisions caddyfile for a replay. Rule names are process-wide:
// each test names its own.
func load(t testing.TB, caddyfile string) *Replayer {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	p := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(p, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(p, "caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// site is a Caddyfile of one site: a rate_limit block of rules, then
// the handlers of rest.
func site(rules, rest string) string {
	return "{\n\tadmin off\n}\n:8080 {\n\trate_limit {" + rules + "\t}\n\t" + rest + "\n}"
}

// entry is a logged GET of uri from ip, begun at sec seconds.
func entry(sec float64, ip, uri string) *accesslog.Entry {
	start := time.Unix(0, int64(sec*1e9))
	return &accesslog.Entry{Start: start, End: start, Status: 200, Remote: ip + ":5000", Client: ip,
		Proto: "HTTP/1.1", Method: "GET", Host: "example.com", URI: uri, Header: http.Header{}}
}

// summaryRule is the summary's rule of name (zero if none).
func summaryRule(t testing.TB, s Summary, name string) Rule {
	for _, r := range s.Rules {
		if r.Name == name {
			return r
		}
	}
	if t != nil {
		t.Fatalf("no rule %q in %+v", name, s.Rules)
	}
	return Rule{}
}

// TestReplayVirtualClock: decisions follow the log's clock: three requests
// within a second, then three 100 s later, against 2 per 10 s, deny one
// each time (on the wall clock, all six fall in one window: four denied).
func TestReplayVirtualClock(t *testing.T) {
	r := load(t, site(`
		name clock
		limit 2 10s
`, `respond "ok"`))
	var denied []int
	for i, sec := range []float64{1000, 1000.1, 1000.2, 1100, 1100.1, 1100.2} {
		r.Replay(entry(sec, "192.0.2.1", "/"))
		if r.report.Replay429 > int64(len(denied)) {
			denied = append(denied, i)
		}
	}
	if fmt.Sprint(denied) != "[2 5]" {
		t.Fatalf("denied requests %v, want [2 5]", denied)
	}
	// the peak: 3 units in 10 s (the second burst, 100 s on, does not add)
	if got := summaryRule(t, r.report.Summary(), "clock"); got.Peak.Max != 3 || got.Denied != 2 || got.Requests != 6 {
		t.Fatalf("rule clock: %+v, want 6 requests, 2 denied, peak 3", got)
	}
}

// TestReplayDoesNotWait: a leaky bucket's delay is decided, not waited
// for (an hour here: the test would time out).
func TestReplayDoesNotWait(t *testing.T) {
	r := load(t, site(`
		name nowait
		algorithm leaky_bucket
		limit 1 1h
		max_delay 24h
`, `reverse_proxy 127.0.0.1:1`))
	for i := range 3 {
		r.Replay(entry(50+float64(i), "192.0.2.1", "/"))
	}
	if got := summaryRule(t, r.report.Summary(), "nowait"); got.Requests != 3 || got.Denied != 0 {
		t.Fatalf("rule nowait: %+v, want 3 requests delayed, none denied", got)
	}
}

// TestReplayPeaks: each key's peak units in the shortest window, their
// percentiles, and the smallest limit denying at most 1% of keys.
func TestReplayPeaks(t *testing.T) {
	r := load(t, site(`
		name peaks
		limit 1000 1m
		limit 100000 1h
`, `respond "ok"`))
	// key k sends k requests, all within its first minute
	for k := 1; k <= 200; k++ {
		for i := range k {
			r.Replay(entry(3600+float64(i)*0.1, fmt.Sprintf("10.0.%d.%d", k/256, k%256), "/"))
		}
	}
	got := summaryRule(t, r.report.Summary(), "peaks")
	// 200 keys: 1% is 2 keys; 198 is the smallest limit denying only 199 and 200
	if got.Keys != 200 || got.Peak != (Peaks{P50: 100, P99: 198, Max: 200}) || got.SuggestedLimit != 198 || got.WindowSeconds != 60 || got.Limit != 1000 {
		t.Fatalf("rule peaks: %+v", got)
	}
}

// TestReplaySlidingPeak: a burst across a window boundary counts the
// previous window's units by their overlap with the window ending now.
func TestReplaySlidingPeak(t *testing.T) {
	r := load(t, site(`
		name sliding
		limit 100 10s
`, `respond "ok"`))
	// 10 units at 9.5 s of window [0, 10), 10 at 10.5 s: 95% of the first
	// window's 10 overlaps [0.5, 10.5)
	for i := range 10 {
		r.Replay(entry(1_000_000_009.5+float64(i)*0.001, "192.0.2.1", "/"))
	}
	for i := range 10 {
		r.Replay(entry(1_000_000_010.5+float64(i)*0.001, "192.0.2.1", "/"))
	}
	if got := summaryRule(t, r.report.Summary(), "sliding"); got.Peak.Max != 20 {
		t.Fatalf("peak %d, want 20 (10 + ⌈10 × 0.95⌉)", got.Peak.Max)
	}
}

// TestReplayCallsNoUpstream: reverse_proxy, in a handle block and at the
// top, is not called; its stand-in answers with the logged status.
func TestReplayCallsNoUpstream(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { calls.Add(1) }))
	defer up.Close()
	proxy := "reverse_proxy " + up.Listener.Addr().String()
	r := load(t, site(`
		name upstream
		limit 3 1m
`, "handle /api/* {\n\t\t"+proxy+"\n\t}\n\t"+proxy))
	statuses := map[int]int{}
	for i := range 6 {
		e := entry(500+float64(i), "192.0.2.1", []string{"/api/x", "/"}[i%2])
		e.Status = 201
		r.Replay(e)
		statuses[r.rec.status]++
	}
	if calls.Load() != 0 {
		t.Fatalf("the upstream was called %d times", calls.Load())
	}
	if r.report.Replay429 != 3 || statuses[201] != 3 {
		t.Fatalf("429s %d, statuses %v: want 3 answered 201 by the stand-in, 3 refused", r.report.Replay429, statuses)
	}
}

// TestReplayKeysOfRulesApart: two rules whose keys are the same text (one
// by client address, one by a header holding the address of another
// client) keep their tallies apart, though the report finds a key's
// tallies of all rules in one map.
func TestReplayKeysOfRulesApart(t *testing.T) {
	r := load(t, site(`
		rule apart-ip {
			limit 2 1m
		}
		rule apart-hdr {
			by header X-K
			limit 3 1m
		}
`, `respond "ok"`))
	// 192.0.2.1 sends 4 naming 192.0.2.2; 192.0.2.2 sends 2 naming 192.0.2.1
	for i, c := range []string{"1", "1", "2", "1", "2", "1"} {
		e := entry(100+float64(i), "192.0.2."+c, "/")
		e.Header = http.Header{"X-K": {"192.0.2." + map[string]string{"1": "2", "2": "1"}[c]}}
		r.Replay(e)
	}
	s := r.report.Summary()
	ip, hdr := summaryRule(t, s, "apart-ip"), summaryRule(t, s, "apart-hdr")
	// apart-ip: .1 allowed 2 of 4; apart-hdr sees the 4 the first let on:
	// "192.0.2.2" twice (from .1), "192.0.2.1" twice (from .2): none denied
	if ip.Requests != 6 || ip.Denied != 2 || ip.Keys != 2 || ip.DeniedKeys != 1 || ip.Peak.Max != 4 ||
		len(ip.TopDenied) != 1 || ip.TopDenied[0] != (KeyCount{Key: "192.0.2.1", Denied: 2}) {
		t.Errorf("rule apart-ip: %+v", ip)
	}
	if hdr.Requests != 4 || hdr.Denied != 0 || hdr.Keys != 2 || hdr.Peak.Max != 2 {
		t.Errorf("rule apart-hdr: %+v", hdr)
	}
}

// TestReplayAllocations: a replayed line allocates 10 times or fewer once
// its key is known (the request, its context and the routes are made
// once; a new replacer a line): 46 when each line was prepared as a live
// request and each route's handlers chained anew.
func TestReplayAllocations(t *testing.T) {
	r := load(t, benchCaddyfile("allocs", "/api/*"))
	var e accesslog.Entry
	if err := e.Decode(benchLine(7, 100)); err != nil {
		t.Fatal(err)
	}
	r.Replay(&e)
	allocs := testing.AllocsPerRun(50, func() {
		e.Start = e.Start.Add(time.Second) // 50 in 50 s: under 100 a minute
		r.Replay(&e)
	})
	if allocs > 10 {
		t.Errorf("%.1f allocations a line, want at most 10", allocs)
	}
	if got := summaryRule(t, r.report.Summary(), "allocs-api"); got.Requests != 52 || got.Denied != 0 {
		t.Errorf("rule allocs-api: %+v, want 52 requests, none denied", got)
	}
}
