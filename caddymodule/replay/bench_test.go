package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
	"github.com/edgebyte/edgelimit/internal/cputime"
)

// benchCaddyfile is a site of two rules, under /api/ by client IP and
// everywhere by client IP, in front of a reverse_proxy; match is the
// rules' path, /none to measure the routing alone.
func benchCaddyfile(name, match string) string {
	return fmt.Sprintf(`{
	admin off
}
:8080 {
	rate_limit %[2]s {
		rule %[1]s-api {
			limit 100 1m
		}
		rule %[1]s-all {
			limit 1000 1h
		}
	}
	handle /api/* {
		reverse_proxy 127.0.0.1:1
	}
	respond "ok"
}`, name, match)
}

// benchLine is line i of a generated access log: a GET of /api/ from one
// of keys clients, 100 requests a second, with the headers a browser
// sends.
func benchLine(i, keys int) []byte {
	k := i % keys
	ip := fmt.Sprintf("10.%d.%d.%d", k>>16&255, k>>8&255, k&255)
	b, _ := json.Marshal(map[string]any{
		"level": "info", "ts": 1_700_000_000 + float64(i)/100, "logger": "http.log.access.log0", "msg": "handled request",
		"request": map[string]any{
			"remote_ip": "127.0.0.1", "remote_port": "40000", "client_ip": ip, "proto": "HTTP/1.1",
			"method": "GET", "host": "example.com", "uri": fmt.Sprintf("/api/items/%d?page=2", i%5000),
			"headers": map[string][]string{"User-Agent": {"Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0"}, "Accept": {"*/*"},
				"Accept-Encoding": {"gzip, br"}, "X-Forwarded-For": {ip}, "Referer": {"https://example.com/"}, "Cookie": {"REDACTED"}},
		},
		"bytes_read": 0, "user_id": "", "duration": 0.0021, "size": 512, "status": 200,
		"resp_headers": map[string][]string{"Server": {"Caddy"}, "Content-Type": {"application/json"}},
	})
	return b
}

// BenchmarkReplay serves decoded requests through a config: "routing"
// with rules that match nothing (the request rebuilt, Caddy's request
// setup, the routes, the stand-in), "decisions" with both rules deciding
// every request. 100,000 keys; lines per second of CPU.
func BenchmarkReplay(b *testing.B) {
	lines := make([]accesslog.Entry, 4096)
	for i := range lines {
		if err := lines[i].Decode(benchLine(i*25, 100_000)); err != nil { // 4096 × 25 lines: every key
			b.Fatal(err)
		}
	}
	for i, tc := range []struct{ name, match string }{{"routing", "/none"}, {"decisions", "/api/*"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := load(b, benchCaddyfile(fmt.Sprintf("bench%d-%d", i, b.N), tc.match))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cputime.Used()
			for n := 0; n < b.N; n++ {
				e := &lines[n&4095]
				e.Start = e.Start.Add(10_000_000) // 100 a second
				r.Replay(e)
			}
			b.ReportMetric(float64(b.N)/(cputime.Used()-cpu).Seconds(), "lines/cpu-s")
		})
	}
}

// BenchmarkReplayLog is the whole replay of a generated log of 1M lines
// (100,000 keys) from a file, as the command runs it: read, decode,
// serve, count. Run with -benchtime 1x: lines per second of CPU, and the
// CPU a line split three ways, each measured over the whole log: reading
// and decoding it alone; the routing (the log replayed through the
// config with rules matching nothing, less decoding); the decisions (the
// replay with both rules deciding every line, less the routing run).
func BenchmarkReplayLog(b *testing.B) {
	const lines = 1_000_000
	path := filepath.Join(b.TempDir(), "access.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for i := range lines {
		f.Write(append(benchLine(i, 100_000), '\n'))
	}
	f.Close()
	// replayAll is the CPU of reading and replaying the log through r; of
	// reading it alone if r is nil.
	replayAll := func(r *Replayer) time.Duration {
		cpu := cputime.Used()
		rd, err := accesslog.Open([]string{path})
		if err != nil {
			b.Fatal(err)
		}
		var e accesslog.Entry
		for ok, _ := rd.Next(&e); ok; ok, _ = rd.Next(&e) {
			if r != nil {
				r.Replay(&e)
			}
		}
		if r != nil && r.report.Requests != lines {
			b.Fatalf("replayed %d of %d lines", r.report.Requests, lines)
		}
		return cputime.Used() - cpu
	}
	for n := 0; n < b.N; n++ {
		decode := replayAll(nil)
		routing := replayAll(load(b, benchCaddyfile(fmt.Sprintf("logr%d", n), "/none")))
		whole := replayAll(load(b, benchCaddyfile(fmt.Sprintf("log%d", n), "/api/*")))
		perLine := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / lines }
		b.ReportMetric(lines/whole.Seconds(), "lines/cpu-s")
		b.ReportMetric(perLine(decode), "decode-ns/line")
		b.ReportMetric(perLine(routing-decode), "routing-ns/line")
		b.ReportMetric(perLine(whole-routing), "decisions-ns/line")
	}
}

// BenchmarkReplayKeys is the memory of a replay at 1M keys: each of 1M
// requests from a client of its own, through both rules (the rules'
// limiters and the report's counts of each key). Run with -benchtime 1x.
func BenchmarkReplayKeys(b *testing.B) {
	const keys = 1_000_000
	for n := 0; n < b.N; n++ {
		r := load(b, benchCaddyfile(fmt.Sprintf("keys%d", n), "/api/*"))
		var e accesslog.Entry
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range keys {
			if err := e.Decode(benchLine(i, keys)); err != nil {
				b.Fatal(err)
			}
			r.Replay(&e)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := summaryRule(nil, r.report.Summary(), fmt.Sprintf("keys%d-api", n)).Keys; got != keys {
			b.Fatalf("%d keys, want %d", got, keys)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "heap-B/key")
		runtime.KeepAlive(r)
	}
}
