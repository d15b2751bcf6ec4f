package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The cpu stage measures what a request costs the server in CPU time, not
// in throughput: the server's time on a core (the first field of
// /proc/<pid>/task/*/schedstat, every thread, in ns) over a slice,
// divided by the requests it served. Time the VM's core was taken away
// (steal) or spent on another process is not counted.
//
// What still moves it, on this repository's VMs by ±5–10% from one
// second to the next: the host's other guests sharing the core's caches
// and its clock. That drift is slow beside a second but no slower than a
// few, so two servers loaded one after the other in turn do not cancel
// it (their ratio moved by ±13% a pair). Loaded at once, on the same
// core, they share it: so each slice loads plain Caddy and one other
// server together, two wrk processes on the other core, and the figure
// is their ratio (±3% a pair). A second copy of plain Caddy, paired the
// same way, shows what the method itself reads as a difference.

// cpuSlices is how many slices each server of a row gets by default (the
// flags -cpu-slices and -cpu-slice change them), after a warm-up of
// cpuWarm each. The mean's error shrinks with the square root of the
// slices: 24 slices of ±3% give a mean within about ±1.2% (two standard
// errors).
const (
	cpuSlices = 24
	cpuSlice  = time.Second
	cpuWarm   = time.Second
)

// The servers of a row: plain Caddy, the yardstick; a second plain Caddy,
// the method's own error; plain Caddy sending the rate-limit headers
// edgelimit sends (static_response's own headers, the cheapest way Caddy
// has to send them, the values copied from edgelimit's response);
// edgelimit with `headers off`; edgelimit;
// caddy-ratelimit. The header control splits what edgelimit adds into
// what any handler sending those headers costs and what its own work
// costs.
const (
	cpuPlain        = "plain"
	cpuPlainTwin    = "plain, a second copy"
	cpuPlainHeaders = "plain + headers"
	cpuHeadersOff   = "edgelimit, headers off"
	cpuEdgelimit    = "edgelimit"
	cpuRatelimit    = "caddy-ratelimit"
)

// cpuServers is the servers of a row, in the order they start (the plain
// server with headers after edgelimit, whose headers it copies), and the
// Caddy build each runs. The first, plain Caddy, is loaded alongside each
// of the others.
var cpuServers = []struct {
	name string
	bin  binary
}{
	{cpuPlain, plain}, {cpuPlainTwin, plain}, {cpuHeadersOff, edgelimit}, {cpuEdgelimit, edgelimit}, {cpuPlainHeaders, plain}, {cpuRatelimit, ratelimit},
}

// cpuAddr is the listen and admin addresses of server i of a row.
func cpuAddr(i int) (listen, admin string) {
	return fmt.Sprintf("127.0.0.1:%d", 18480+2*i), fmt.Sprintf("127.0.0.1:%d", 18481+2*i)
}

// cpuRun is one server's share of a slice: requests served, the non-2xx
// among them, and the server's CPU time over them.
type cpuRun struct {
	Requests, Denied int64
	CPU              time.Duration
}

// perRequest is the CPU time a request took, in µs.
func (r cpuRun) perRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.CPU) / float64(time.Microsecond) / float64(r.Requests)
}

// cpuRow is one traffic shape's slices: per server of cpuServers but
// plain Caddy, its runs (Runs) and plain Caddy's runs at the same time
// (Plain), slice by slice.
type cpuRow struct {
	Scenario scenario
	Runs     map[string][]cpuRun
	Plain    map[string][]cpuRun
	Slice    time.Duration // each slice's length
}

// cpuScenarios are the rows: the allowing, the denying and the
// 200,000-key rows of the end-to-end stage, the one-key denial at 1 an
// hour (all but the first request denied).
func cpuScenarios() []scenario {
	all := scenarios(0)
	return []scenario{
		all[0],
		{Name: "one key, denying (1/hour)", Limit: 1, Window: time.Hour, Key: "ip"},
		all[2],
		all[4],
	}
}

// runCPU runs every row: its servers (cpuServers) at once on core 0
// (GOMAXPROCS=1), slices slices of d each in which plain Caddy and each
// other server in turn take load together from two wrk processes on core
// 1, the order rotated from slice to slice.
func runCPU(binDir, dir string, quick bool, slices int, d time.Duration) ([]cpuRow, error) {
	if quick {
		slices, d = 2, time.Second
	}
	var rows []cpuRow
	for _, sc := range cpuScenarios() {
		row, err := cpuRowRun(binDir, dir, sc, slices, d)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// cpuRowRun is one row of runCPU.
func cpuRowRun(binDir, dir string, sc scenario, slices int, d time.Duration) (cpuRow, error) {
	row := cpuRow{Scenario: sc, Runs: map[string][]cpuRun{}, Plain: map[string][]cpuRun{}, Slice: d}
	work, err := os.MkdirTemp(dir, "run-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(work)
	servers := map[string]*server{}
	urls := map[string]string{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	var sent http.Header // the rate-limit headers of edgelimit's first response
	for i, srv := range cpuServers {
		name, bin, run := srv.name, srv.bin, sc
		run.HeadersOff = name == cpuHeadersOff
		hs := handlers(bin, run)
		if name == cpuPlainHeaders {
			hs = []map[string]any{{"handler": "static_response", "body": "ok", "headers": sent}}
		}
		listen, admin := cpuAddr(i)
		s, err := startAt(bin.path(binDir), listen, admin, hs, nil, 0, work)
		if err != nil {
			return row, err
		}
		servers[name], urls[name] = s, "http://"+listen+"/"
		if sc.TouchAll && bin != plain {
			if err := touchAllAt(urls[name], scriptKeys); err != nil {
				return row, err
			}
		}
		if name == cpuEdgelimit {
			if sent, err = rateLimitHeaders(urls[name]); err != nil {
				return row, err
			}
		}
		if _, err := runWrkURL(urls[name], dir, sc.Script, cpuWarm, 1, loadConns); err != nil {
			return row, err
		}
	}
	others := cpuServers[1:]
	for k := range slices {
		for j := range others {
			name := others[(j+k)%len(others)].name
			p, r, err := measurePair(servers[cpuPlain], servers[name], urls[cpuPlain], urls[name], dir, sc, d)
			if err != nil {
				return row, fmt.Errorf("%s, %s: %w", sc.Name, name, err)
			}
			log.Printf("%s, slice %d, %s: %d requests (%d denied), %.2f µs CPU each; plain beside it %.2f",
				sc.Name, k+1, name, r.Requests, r.Denied, r.perRequest(), p.perRequest())
			row.Runs[name] = append(row.Runs[name], r)
			row.Plain[name] = append(row.Plain[name], p)
		}
	}
	return row, nil
}

// rateLimitHeaders is the RateLimit, RateLimit-Policy and Retry-After
// headers of the second of two responses from url, to requests that carry
// the key header of the scripts: what plain Caddy sends in the "plain +
// headers" control. The second: a denying row's key (a limit of 1) has
// its first request allowed, and the control must send what a denial
// sends, Retry-After included.
func rateLimitHeaders(url string) (http.Header, error) {
	var resp *http.Response
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Client", "client-probe")
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return nil, err
		}
		resp.Body.Close()
	}
	h := http.Header{}
	for _, k := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("%s sent no RateLimit header", url)
	}
	return h, nil
}

// measurePair loads a at urlA and b at urlB together for d, a wrk process
// each on core 1, and measures each server's CPU time over it.
func measurePair(a, b *server, urlA, urlB, dir string, sc scenario, d time.Duration) (cpuRun, cpuRun, error) {
	before, err := cpuTimes(a, b)
	if err != nil {
		return cpuRun{}, cpuRun{}, err
	}
	type loaded struct {
		r   wrkResult
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		r, err := runWrkURL(urlA, dir, sc.Script, d, 1, loadConns)
		done <- loaded{r, err}
	}()
	rb, errB := runWrkURL(urlB, dir, sc.Script, d, 1, loadConns)
	la := <-done
	after, err := cpuTimes(a, b)
	for _, err := range []error{la.err, errB, err} {
		if err != nil {
			return cpuRun{}, cpuRun{}, err
		}
	}
	if la.r.Errors > 0 || rb.Errors > 0 {
		return cpuRun{}, cpuRun{}, fmt.Errorf("%d and %d socket errors", la.r.Errors, rb.Errors)
	}
	if after[0] < before[0] || after[1] < before[1] {
		return cpuRun{}, cpuRun{}, fmt.Errorf("a server's CPU time went down (a thread exited)")
	}
	return cpuRun{Requests: la.r.Requests, Denied: la.r.Denied, CPU: after[0] - before[0]},
		cpuRun{Requests: rb.Requests, Denied: rb.Denied, CPU: after[1] - before[1]}, nil
}

// cpuTimes is each server's cpuTime, in order.
func cpuTimes(servers ...*server) ([]time.Duration, error) {
	ts := make([]time.Duration, len(servers))
	for i, s := range servers {
		t, err := s.cpuTime()
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// cpuTime is the server's time on a core so far, every thread's (taskset
// execs the server, so the pid is the server's).
func (s *server) cpuTime() (time.Duration, error) { return procCPU(s.cmd.Process.Pid) }

// procCPU is process pid's time on a core so far, every thread's. A
// thread that exits takes its time with it; Go's runtime and redis-server
// keep theirs.
func procCPU(pid int) (time.Duration, error) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no /proc/%d/task/*/schedstat (a kernel without CONFIG_SCHED_INFO?)", pid)
	}
	var sum time.Duration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		ns, err := parseSchedstat(string(data))
		if err != nil {
			return 0, err
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads a thread's time on a core, the first of the three
// fields of /proc/<pid>/task/<tid>/schedstat, in ns.
func parseSchedstat(line string) (time.Duration, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return 0, fmt.Errorf("unreadable schedstat: %q", line)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("unreadable schedstat: %q", line)
	}
	return time.Duration(ns), nil
}
