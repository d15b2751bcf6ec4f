package main

import (
	"fmt"
	"log"
	"os"
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
// finds waiting. So the three servers of a row run at once, idle but for
// the one under load, and take the load in turn in short slices: a
// change in the machine's load falls on all three alike.

// cpuSlices is how many slices of cpuSlice each server of a row gets,
// after a warm-up of cpuWarm each.
const (
	cpuSlices = 10
	cpuSlice  = 2 * time.Second
	cpuWarm   = time.Second
)

// The three servers of a row listen side by side.
var cpuAddrs = map[binary][2]string{
	plain:     {"127.0.0.1:18480", "127.0.0.1:18481"},
	edgelimit: {"127.0.0.1:18482", "127.0.0.1:18483"},
	ratelimit: {"127.0.0.1:18484", "127.0.0.1:18485"},
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

// cpuRow is one traffic shape's slices, per binary (plain included).
type cpuRow struct {
	Scenario scenario
	Runs     map[binary][]cpuRun
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

// runCPU runs every row: its three servers at once on core 0 (GOMAXPROCS=1),
// wrk on core 1 loading each in turn, cpuSlices slices each, the order
// rotated from slice to slice.
func runCPU(binDir, dir string, quick bool) ([]cpuRow, error) {
	slices, d := cpuSlices, cpuSlice
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
	row := cpuRow{Scenario: sc, Runs: map[binary][]cpuRun{}}
	work, err := os.MkdirTemp(dir, "run-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(work)
	order := []binary{plain, edgelimit, ratelimit}
	servers := map[binary]*server{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, bin := range order {
		a := cpuAddrs[bin]
		s, err := startAt(bin.path(binDir), a[0], a[1], handlers(bin, sc), nil, 0, work)
		if err != nil {
			return row, err
		}
		servers[bin] = s
		if sc.TouchAll && bin != plain {
			if err := touchAllAt("http://"+a[0]+"/", scriptKeys); err != nil {
				return row, err
			}
		}
		if _, err := runWrkURL("http://"+a[0]+"/", dir, sc.Script, cpuWarm, 1, loadConns); err != nil {
			return row, err
		}
	}
	for k := range slices {
		for j := range order {
			bin := order[(j+k)%len(order)]
			r, err := measureCPU(servers[bin], "http://"+cpuAddrs[bin][0]+"/", dir, sc, d, tick)
			if err != nil {
				return row, fmt.Errorf("%s, %s: %w", sc.Name, bin, err)
			}
			log.Printf("%s, slice %d, %s: %d requests (%d denied), %.2f µs CPU each",
				sc.Name, k+1, bin, r.Requests, r.Denied, r.perRequest())
			row.Runs[bin] = append(row.Runs[bin], r)
		}
	}
	return row, nil
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

// cpuSection is the CPU per request table.
func cpuSection(p printer, res *results) {
	if len(res.CPU) == 0 {
		return
	}
	p("### CPU per request, end to end\n\n")
	p("The three Caddy binaries of the end-to-end stage, each serving `static_response \"ok\"` behind its limiter (plain: none). ")
	p("For each row the three servers run at once, pinned to core 0 with GOMAXPROCS=1, and wrk (one thread, %d connections, on core 1) loads them in turn: ", loadConns)
	p("%d slices of %v each, the order rotated from slice to slice, after a 1 s warm-up each. ", cpuSliceCount(res), cpuSlice)
	p("CPU per request is the loaded server's utime+stime (`/proc/<pid>/stat`, every thread, in ticks of 10 ms) over its slice, divided by the requests it served: ")
	p("time the VM lost to steal or to another process is not in it; cache sharing with other processes and how many requests each wake-up finds still move it. ")
	p("The µs columns are medians (range) over the slices; the \"over plain\" columns are each slice's CPU per request over plain Caddy's in the same turn, less 1, then the median (range).\n\n")
	p("| traffic, limit | plain µs/req | edgelimit µs/req | caddy-ratelimit µs/req | edgelimit over plain | caddy-ratelimit over plain | denied: edgelimit | denied: caddy-ratelimit |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range res.CPU {
		pl, ours, theirs := cpuPer(row.Runs[plain]), cpuPer(row.Runs[edgelimit]), cpuPer(row.Runs[ratelimit])
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Scenario.Name, figure(pl), figure(ours), figure(theirs),
			percent(ratios(ours, pl)), percent(ratios(theirs, pl)), cpuDenied(row.Runs[edgelimit]), cpuDenied(row.Runs[ratelimit]))
	}
	byName := map[string]cpuRow{}
	for _, row := range res.CPU {
		byName[row.Scenario.Name] = row
	}
	allowing, denying := byName[cpuScenarios()[0].Name], byName[cpuScenarios()[1].Name]
	if a, d := cpuPer(allowing.Runs[edgelimit]), cpuPer(denying.Runs[edgelimit]); len(a) > 0 && len(d) > 0 {
		p("\nOne key, edgelimit: a denied request takes %s µs of CPU, an allowed one %s (targets: at most +3%% over plain Caddy when allowing; a denial cheaper than an allowed request).\n", num(median(d)), num(median(a)))
	}
	p("\n")
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
		n = max(n, len(row.Runs[edgelimit]))
	}
	return n
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

// percent is ratios less 1, in percent: "**+2.1%** (−0.4%–+3.9%)".
func percent(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := spread(vs)
	return fmt.Sprintf("**%+.1f%%** (%+.1f%% – %+.1f%%)", 100*(median(vs)-1), 100*(lo-1), 100*(hi-1))
}
