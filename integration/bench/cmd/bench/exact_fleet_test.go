package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFleetConfig: edgelimit's fleet decides in the stage's Redis;
// caddy-ratelimit's syncs through the shared storage, at its default
// intervals or at the case's.
func TestFleetConfig(t *testing.T) {
	cases := map[string]fleetCase{}
	for _, c := range fleetCases() {
		if c.Pace == 0 {
			cases[string(c.Bin)+"/"+c.Interval.String()] = c
		}
	}
	if len(cases) != 3 || len(fleetCases()) != 6 {
		t.Fatalf("fleetCases: %+v", fleetCases())
	}

	edge := cases["edgelimit/0s"]
	h := fleetHandlers(edge, "/shared")
	rule := h[0]["rules"].([]any)[0].(map[string]any)
	if rule["store"] != "redis" || rule["limits"].([]any)[0].(map[string]any)["count"] != int64(exactLimit) {
		t.Errorf("edgelimit rule: %v", rule)
	}
	app, _ := json.Marshal(fleetApp(edge))
	if string(app) != `{"store":{"redis":{"addresses":["`+redisAddr+`"]}}}` {
		t.Errorf("edgelimit app: %s", app)
	}

	for interval, want := range map[string]string{
		"0s": `{}`,
		"1s": `{"read_interval":"1s","write_interval":"1s"}`,
	} {
		c := cases["caddy-ratelimit/"+interval]
		if fleetApp(c) != nil {
			t.Errorf("caddy-ratelimit, %s: an app %v", interval, fleetApp(c))
		}
		h := fleetHandlers(c, "/shared")
		got, _ := json.Marshal(h[0]["distributed"])
		storage, _ := json.Marshal(h[0]["storage"])
		if string(got) != want || string(storage) != `{"module":"file_system","root":"/shared"}` || h[0]["rate_limits"] == nil {
			t.Errorf("caddy-ratelimit, %s: distributed %s, storage %s, handler %v", interval, got, storage, h[0])
		}
	}
}

// TestFleetSend: every request sent once, the connections spread over
// the servers, the paced load taking its time.
func TestFleetSend(t *testing.T) {
	var mu sync.Mutex
	clients := map[string]map[string]bool{} // server → client addresses
	var urls []string
	for i := range 3 {
		name := string(rune('a' + i))
		clients[name] = map[string]bool{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			clients[name][r.RemoteAddr] = true
			mu.Unlock()
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	var ok atomic.Int64
	took := fleetSend(urls, 7, 60, 200*time.Millisecond, func(code int) {
		if code == http.StatusOK {
			ok.Add(1)
		}
	})
	if ok.Load() != 60 {
		t.Errorf("%d of 60 answered 200", ok.Load())
	}
	if took < 190*time.Millisecond {
		t.Errorf("paced over 200ms, took %v", took)
	}
	// 7 connections over 3 servers: 3, 2, 2.
	for name, want := range map[string]int{"a": 3, "b": 2, "c": 2} {
		if len(clients[name]) != want {
			t.Errorf("server %s: %d connections, want %d", name, len(clients[name]), want)
		}
	}
	if connSplit(7, 3) != "3, 2, 2" || connSplit(64, 3) != "22, 21, 21" {
		t.Errorf("connSplit: %q, %q", connSplit(7, 3), connSplit(64, 3))
	}
}

func TestSample(t *testing.T) {
	const fb = "caddy_rate_limit_store_fallbacks_total"
	for _, tc := range []struct {
		line, metric, label, by string
		v                       int64
		ok                      bool
	}{
		{`caddy_rate_limit_store_fallbacks_total{mode="local",rule="bench"} 17`, fb, "", "", 17, true},
		{`caddy_rate_limit_store_fallbacks_total{mode="fail_open",rule="x"} 2.5e+06`, fb, "mode", "fail_open", 2_500_000, true},
		{`caddy_rate_limit_store_requests_total{rule="hot",via="coalesced"} 12345`, "caddy_rate_limit_store_requests_total", "via", "coalesced", 12345, true},
		{`# TYPE caddy_rate_limit_store_fallbacks_total counter`, fb, "", "", 0, false},
		{`caddy_rate_limit_store_errors_total{reason="timeout"} 3`, fb, "", "", 0, false},
		{`caddy_rate_limit_store_round_trips_total 4321`, "caddy_rate_limit_store_round_trips_total", "", "", 4321, true},
		{`caddy_rate_limit_store_round_trips_total_more 1`, "caddy_rate_limit_store_round_trips_total", "", "", 0, false},
	} {
		by, v, ok, err := sample(tc.line, tc.metric, tc.label)
		if err != nil || by != tc.by || v != tc.v || ok != tc.ok {
			t.Errorf("sample(%q) = %q, %d, %v, %v; want %q, %d, %v", tc.line, by, v, ok, err, tc.by, tc.v, tc.ok)
		}
	}
	if _, _, _, err := sample(`caddy_rate_limit_store_fallbacks_total{mode="local"} x`, fb, ""); err == nil {
		t.Error("sample accepted a value that is no number")
	}
}

// TestExactSections: the one-process rows keep their table, the fleet
// rows get theirs.
func TestExactSections(t *testing.T) {
	res := &results{Exact: []exactRow{
		{Bin: edgelimit, Admitted: []int64{1000, 1000, 1000}},
		{Bin: ratelimit, Processes: 3, Sharing: "`distributed`", Pace: fleetPace, Admitted: []int64{2900, 3000, 3000}, Denied: []int64{2097, 1997, 1997},
			Took: []time.Duration{20 * time.Second, 20 * time.Second, 21 * time.Second}},
	}}
	var b strings.Builder
	exactSections(func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) }, res)
	text := b.String()
	for _, want := range []string{
		"| edgelimit | [1000 1000 1000] | 0 |\n",
		"| caddy-ratelimit | `distributed` | paced over 20s | [2900 3000 3000] | 3.00 (2.90–3.00) | [2097 1997 1997] | 0 | — | 20 (20–21) |\n",
		"(22, 21, 21)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Count(text, "### Exactness") != 1 {
		t.Errorf("headings:\n%s", text)
	}
}
