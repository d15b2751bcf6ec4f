package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cpu stage measures what a request costs the server in CPU time, not
// in throughput: the server's user+system time (utime+stime of
// /proc/<pid>/stat, every thread) over a run, divided by the requests it
// served. Time the VM's core was taken away (steal) or spent on another
// process is not counted. What still moves it: other processes sharing
// the core's caches, and how many requests each of the server's wake-ups
// finds waiting. So the servers of a row run at once, idle but for
// the one under load, and take the load in turn in short slices: a
// change in the machine's load falls on all of them alike.

// cpuSlices is how many slices of cpuSlice each server of a row gets by
// default (the flags -cpu-slices and -cpu-slice change them), after a
// warm-up of cpuWarm each. The median's error shrinks with the square
// root of the slices: on this repository's VMs one slice's ratio to
// another server's moves by ±5–10%.
const (
	cpuSlices = 12
	cpuSlice  = 2 * time.Second
	cpuWarm   = time.Second
)

// The servers of a row, in the order they start: plain Caddy, plain Caddy
// sending the rate-limit headers edgelimit sends (Caddy's own headers
// handler, the values copied from edgelimit's response), edgelimit with
// `headers off`, edgelimit, caddy-ratelimit. The two controls split what
// edgelimit adds into what any handler sending those headers costs and
// what its own work costs.
const (
	cpuPlain        = "plain"
	cpuPlainHeaders = "plain + headers"
	cpuHeadersOff   = "edgelimit, headers off"
	cpuEdgelimit    = "edgelimit"
	cpuRatelimit    = "caddy-ratelimit"
)

// cpuServers is the servers of a row, in the order they start (the plain
// server with headers after edgelimit, whose headers it copies), and the
// Caddy build each runs.
var cpuServers = []struct {
	name string
	bin  binary
}{
	{cpuPlain, plain}, {cpuHeadersOff, edgelimit}, {cpuEdgelimit, edgelimit}, {cpuPlainHeaders, plain}, {cpuRatelimit, ratelimit},
}

// cpuAddr is the listen and admin addresses of server i of a row.
func cpuAddr(i int) (listen, admin string) {
	return fmt.Sprintf("127.0.0.1:%d", 18480+2*i), fmt.Sprintf("127.0.0.1:%d", 18481+2*i)
}

// cpuRun is one slice: requests served, the non-2xx among them, and the
// server's CPU time over them.
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

// cpuRow is one traffic shape's slices, per server of cpuServers.
type cpuRow struct {
	Scenario scenario
	Runs     map[string][]cpuRun
	Slice    time.Duration // each run's length; 0 in results of before it was kept: cpuSlice
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

// runCPU runs every row: its servers (cpuServers) at once on core 0 (GOMAXPROCS=1),
// wrk on core 1 loading each in turn, slices slices of d each, the order
// rotated from slice to slice.
func runCPU(binDir, dir string, quick bool, slices int, d time.Duration) ([]cpuRow, error) {
	if quick {
		slices, d = 2, time.Second
	}
	tick, err := clockTick()
	if err != nil {
		return nil, err
	}
	var rows []cpuRow
	for _, sc := range cpuScenarios() {
		row, err := cpuRowRun(binDir, dir, sc, slices, d, tick)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// cpuRowRun is one row of runCPU.
func cpuRowRun(binDir, dir string, sc scenario, slices int, d, tick time.Duration) (cpuRow, error) {
	row := cpuRow{Scenario: sc, Runs: map[string][]cpuRun{}, Slice: d}
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
			hs = append([]map[string]any{{"handler": "headers", "response": map[string]any{"set": sent}}}, hs...)
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
	for k := range slices {
		for j := range cpuServers {
			name := cpuServers[(j+k)%len(cpuServers)].name
			r, err := measureCPU(servers[name], urls[name], dir, sc, d, tick)
			if err != nil {
				return row, fmt.Errorf("%s, %s: %w", sc.Name, name, err)
			}
			log.Printf("%s, slice %d, %s: %d requests (%d denied), %.2f µs CPU each",
				sc.Name, k+1, name, r.Requests, r.Denied, r.perRequest())
			row.Runs[name] = append(row.Runs[name], r)
		}
	}
	return row, nil
}

// rateLimitHeaders is the RateLimit, RateLimit-Policy and Retry-After
// headers of a response from url, to a request that carries the key
// header of the scripts: what plain Caddy sends in the "plain + headers"
// control.
func rateLimitHeaders(url string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Client", "client-probe")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
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

// measureCPU loads s at url for d and measures its CPU time over it.
func measureCPU(s *server, url, dir string, sc scenario, d, tick time.Duration) (cpuRun, error) {
	before, err := s.cpuTime(tick)
	if err != nil {
		return cpuRun{}, err
	}
	r, err := runWrkURL(url, dir, sc.Script, d, 1, loadConns)
	if err != nil {
		return cpuRun{}, err
	}
	after, err := s.cpuTime(tick)
	if err != nil {
		return cpuRun{}, err
	}
	if r.Errors > 0 {
		return cpuRun{}, fmt.Errorf("%d socket errors", r.Errors)
	}
	return cpuRun{Requests: r.Requests, Denied: r.Denied, CPU: after - before}, nil
}

// cpuTime is the server's user+system time so far: utime+stime of
// /proc/<pid>/stat, in clock ticks of tick. (taskset execs the server, so
// the pid is the server's.)
func (s *server) cpuTime(tick time.Duration) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data), tick)
}

// parseStatCPU reads utime+stime (fields 14 and 15) from a /proc/<pid>/stat
// line, whose second field, the command in parentheses, may hold spaces.
func parseStatCPU(stat string, tick time.Duration) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc stat: %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat: %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable utime/stime in /proc stat: %q", stat)
	}
	return time.Duration(utime+stime) * tick, nil
}

// clockTick is the unit of /proc's times (`getconf CLK_TCK`, 100 Hz on
// Linux unless configured otherwise).
func clockTick() (time.Duration, error) {
	out := output("getconf", "CLK_TCK")
	hz, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || hz <= 0 {
		return 0, fmt.Errorf("getconf CLK_TCK: %q", out)
	}
	return time.Second / time.Duration(hz), nil
}

// cpuSection is the CPU per request tables.
func cpuSection(p printer, res *results) {
	if len(res.CPU) == 0 {
		return
	}
	p("### CPU per request, end to end\n\n")
	p("Five Caddy servers per row, each serving `static_response \"ok\"`: plain Caddy; plain Caddy with Caddy's `headers` handler setting the RateLimit, RateLimit-Policy (and on a denial Retry-After) values edgelimit sent to a first request (\"plain + headers\"); edgelimit's rule with `headers off`; edgelimit; caddy-ratelimit (which sends no rate-limit headers on an allowed request). ")
	p("The five run at once, pinned to core 0 with GOMAXPROCS=1, and wrk (one thread, %d connections, on core 1) loads them in turn: ", loadConns)
	p("%d slices of %v each, the order rotated from slice to slice, after a 1 s warm-up each. ", cpuSliceCount(res), cpuSliceLength(res))
	p("CPU per request is the loaded server's utime+stime (`/proc/<pid>/stat`, every thread, in ticks of 10 ms) over its slice, divided by the requests it served: ")
	p("time the VM lost to steal or to another process is not in it; cache sharing with other processes and how many requests each wake-up finds still move it. ")
	p("Medians over the slices, with the interquartile range (the middle half of the slices).\n\n")
	p("| traffic, limit | plain µs/req | plain + headers | edgelimit, headers off | edgelimit | caddy-ratelimit |\n|---|---|---|---|---|---|\n")
	for _, row := range res.CPU {
		p("| %s |", row.Scenario.Name)
		for _, name := range []string{cpuPlain, cpuPlainHeaders, cpuHeadersOff, cpuEdgelimit, cpuRatelimit} {
			p(" %s |", quartileFigure(cpuPer(row.Runs[name])))
		}
		p("\n")
	}
	p("\nEach slice's CPU per request over another server's in the same turn, less 1: the median (interquartile range). ")
	p("\"The headers\" is what sending edgelimit's header values costs plain Caddy; \"edgelimit's own\" is edgelimit over plain Caddy sending the same headers, what its handler adds beyond them.\n\n")
	p("| traffic, limit | the headers | edgelimit, headers off, over plain | edgelimit over plain | edgelimit's own | caddy-ratelimit over plain | denied: edgelimit | denied: caddy-ratelimit |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range res.CPU {
		per := func(name string) []float64 { return cpuPer(row.Runs[name]) }
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Scenario.Name,
			percent(ratios(per(cpuPlainHeaders), per(cpuPlain))),
			percent(ratios(per(cpuHeadersOff), per(cpuPlain))),
			percent(ratios(per(cpuEdgelimit), per(cpuPlain))),
			percent(ratios(per(cpuEdgelimit), per(cpuPlainHeaders))),
			percent(ratios(per(cpuRatelimit), per(cpuPlain))),
			cpuDenied(row.Runs[cpuEdgelimit]), cpuDenied(row.Runs[cpuRatelimit]))
	}
	byName := map[string]cpuRow{}
	for _, row := range res.CPU {
		byName[row.Scenario.Name] = row
	}
	allowing, denying := byName[cpuScenarios()[0].Name], byName[cpuScenarios()[1].Name]
	if a, d := cpuPer(allowing.Runs[cpuEdgelimit]), cpuPer(denying.Runs[cpuEdgelimit]); len(a) > 0 && len(d) > 0 {
		p("\nOne key, edgelimit: a denied request takes %s µs of CPU, an allowed one %s (targets: at most +3%% over plain Caddy when allowing; a denial cheaper than an allowed request). ", num(median(d)), num(median(a)))
		p("The rows ran apart, so the plain Caddy of each row's turns is the fairer yardstick: a denial costs %s over plain Caddy serving \"ok\", an allowed request %s.\n",
			percent(ratios(d, cpuPer(denying.Runs[cpuPlain]))), percent(ratios(a, cpuPer(allowing.Runs[cpuPlain]))))
	}
	p("\n")
}

// quartiles is the first and third quartiles of vs (the medians of its
// lower and upper halves).
func quartiles(vs []float64) (q1, q3 float64) {
	s := slices.Clone(vs)
	slices.Sort(s)
	h := len(s) / 2
	return median(s[:h]), median(s[len(s)-h:])
}

// quartileFigure is vs's median with its interquartile range,
// "17.6 (17.2–18.1)".
func quartileFigure(vs []float64) string {
	if len(vs) < 4 {
		return figure(vs)
	}
	q1, q3 := quartiles(vs)
	return fmt.Sprintf("%s (%s–%s)", num(median(vs)), num(q1), num(q3))
}

// cpuPer is each run's CPU per request, in µs.
func cpuPer(rs []cpuRun) []float64 {
	var vs []float64
	for _, r := range rs {
		vs = append(vs, r.perRequest())
	}
	return vs
}

// cpuSliceCount is how many slices a row had per binary.
func cpuSliceCount(res *results) int {
	n := 0
	for _, row := range res.CPU {
		n = max(n, len(row.Runs[cpuEdgelimit]))
	}
	return n
}

// cpuSliceLength is how long a slice of the rows ran.
func cpuSliceLength(res *results) time.Duration {
	for _, row := range res.CPU {
		if row.Slice > 0 {
			return row.Slice
		}
	}
	return cpuSlice
}

// cpuDenied is the share of responses that were not 2xx, over all runs.
func cpuDenied(rs []cpuRun) string {
	var denied, total int64
	for _, r := range rs {
		denied += r.Denied
		total += r.Requests
	}
	if total == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(denied)/float64(total))
}

// percent is ratios less 1, in percent, the median and the interquartile
// range: "**+2.1%** (-0.4% – +3.9%)".
func percent(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := quartiles(vs)
	return fmt.Sprintf("**%+.1f%%** (%+.1f%% – %+.1f%%)", 100*(median(vs)-1), 100*(lo-1), 100*(hi-1))
}
