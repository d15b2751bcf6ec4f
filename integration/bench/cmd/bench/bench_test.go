package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wrkOutput is wrk 4.1.0's report of a run with --latency and some 429s.
const wrkOutput = `Running 4s test @ http://127.0.0.1:18480/
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.10ms    1.05ms  21.30ms   91.20%
    Req/Sec    15.05k     1.10k   16.99k    70.00%
  Latency Distribution
     50%  870.00us
     75%    1.20ms
     90%    2.01ms
     99%    3.37ms
  59900 requests in 4.00s, 10.23MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 53185
Requests/sec:  14975.12
Transfer/sec:      2.56MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 59900, Denied: 53185, Errors: 3, RPS: 14975.12, P50: 870 * time.Microsecond, P99: 3370 * time.Microsecond}
	if r != want {
		t.Errorf("parseWrk = %+v, want %+v", r, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:18480 Connection refused"); err == nil {
		t.Error("parseWrk accepted a failed run")
	}
}

func TestBenchLine(t *testing.T) {
	m := benchLine.FindStringSubmatch("BenchmarkHotKey/edgelimit/sliding_window-2   \t 6598190\t        84.78 ns/op\t       0 B/op\t       0 allocs/op")
	if m == nil || m[1] != "BenchmarkHotKey/edgelimit/sliding_window" || !strings.HasPrefix(m[2], "84.78 ns/op") {
		t.Fatalf("benchLine: %q", m)
	}
}

// TestWriteReport: the generated section is replaced, the rest of the file
// kept; a file without one gets it appended.
func TestWriteReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	os.WriteFile(path, []byte("# Benchmarks\n\nby hand\n\n"+beginMark+"\nold figures\n"+endMark+"\n\n## More by hand\n"), 0o644)
	res := &results{Env: environment{Date: "2026-11-30"}}
	if err := writeReport(path, res); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	if strings.Contains(text, "old figures") || !strings.Contains(text, "Generated 2026-11-30") ||
		!strings.HasPrefix(text, "# Benchmarks\n\nby hand\n\n") || !strings.HasSuffix(text, endMark+"\n\n## More by hand\n") {
		t.Errorf("rewritten file:\n%s", text)
	}

	fresh := filepath.Join(t.TempDir(), "new.md")
	os.WriteFile(fresh, []byte("# Benchmarks\n"), 0o644)
	if err := writeReport(fresh, res); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(fresh)
	if !strings.HasPrefix(string(data), "# Benchmarks\n\n"+beginMark) {
		t.Errorf("appended section:\n%s", data)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.vs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.vs, got, tc.want)
		}
	}
}

// TestCallsPer100: the share of a Redis rule's requests that made a call,
// and the round trips per 100 requests.
func TestCallsPer100(t *testing.T) {
	if got := callsPer100([]map[string]int64{{"call": 10, "coalesced": 30, "over_limit_cache": 60, "round_trips": 4}}); got != "10.0 / 4.0" {
		t.Fatalf("callsPer100 %s, want 10.0 / 4.0", got)
	}
}

// TestSpliceReport: a -only run without saved results rewrites its own
// subsections (replaced where they are, appended if new) and its date in
// the list of reruns, and leaves the rest of the generated section as it
// was.
func TestSpliceReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	head := "# Benchmarks\n\n" + beginMark + "\n## Side by side with the peers\n\nTime taken: 20m (build 2s).\n\n"
	micro := "### Limiter microbenchmarks\n\nold micro figures\n\n"
	exact := "### Exactness under concurrency\n\nold exact figures\n\n"
	tail := endMark + "\n\n## By hand\n"
	os.WriteFile(path, []byte(head+micro+exact+tail), 0o644)
	res := &results{
		Exact:  []exactRow{{Bin: edgelimit, Admitted: []int64{1000}}},
		Memory: []memoryRow{{Name: "edgelimit sliding_window"}},
		Ran:    map[string]string{"exact": "2026-12-01 10:00 UTC", "memory": "2026-12-01 10:00 UTC"},
	}
	if err := spliceReport(path, res, []string{"memory", "exact"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	rerun := "Stages rerun since with `-only` (the code then, the rest as of the date above): memory 2026-12-01 10:00 UTC, exact 2026-12-01 10:00 UTC.\n\n"
	if !strings.HasPrefix(text, head+rerun+micro+"### Exactness under concurrency\n") || strings.Contains(text, "old exact") ||
		!strings.Contains(text, "| edgelimit | [1000] |") || !strings.Contains(text, "\n\n### Memory per key") || !strings.HasSuffix(text, "\n\n"+tail) {
		t.Fatalf("first splice:\n%s", text)
	}

	res.Exact[0].Admitted = []int64{999}
	res.Ran = map[string]string{"exact": "2026-12-01 11:00 UTC"}
	if err := spliceReport(path, res, []string{"exact"}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	text = string(data)
	if strings.Count(text, "### Exactness") != 1 || strings.Count(text, "### Memory") != 1 || !strings.Contains(text, "| [999] |") ||
		!strings.Contains(text, "date above): memory 2026-12-01 10:00 UTC, exact 2026-12-01 11:00 UTC.\n") || !strings.HasSuffix(text, "\n\n"+tail) {
		t.Fatalf("second splice:\n%s", text)
	}
}

// TestParseSchedstat: a thread's time on a core is the first of
// schedstat's three fields, in ns.
func TestParseSchedstat(t *testing.T) {
	got, err := parseSchedstat("2870000123 4000 1200\n")
	if err != nil || got != 2870000123*time.Nanosecond {
		t.Errorf("parseSchedstat = %v, %v; want 2.870000123s", got, err)
	}
	for _, bad := range []string{"", "12 3", "x 1 2", "-5 1 2"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat accepted %q", bad)
		}
	}
}

// The cpu tables' interquartile range: the medians of the lower and the
// upper half (the middle value, with an odd count, in neither).
func TestQuartiles(t *testing.T) {
	for _, c := range []struct {
		vs     []float64
		q1, q3 float64
	}{
		{[]float64{4, 1, 3, 2}, 1.5, 3.5},
		{[]float64{5, 1, 4, 2, 3}, 1.5, 4.5},
		{[]float64{12, 1, 11, 2, 10, 3, 9, 4, 8, 5, 7, 6}, 3.5, 9.5},
	} {
		if q1, q3 := quartiles(c.vs); q1 != c.q1 || q3 != c.q3 {
			t.Errorf("quartiles(%v) = %v, %v; want %v, %v", c.vs, q1, q3, c.q1, c.q3)
		}
	}
	if got := meanFigure([]float64{1.01, 1.02, 1.03, 1.04}); got != "**+2.5%** ± 1.3%" {
		t.Errorf("meanFigure = %q", got)
	}
}

// The cpu section reads each row's own slices: every server of row k
// costs plain Caddy's CPU plus k+1 percent (edgelimit k+5), so a row
// showing another's figure shows a wrong number; and the closing line
// sets the allowing row's edgelimit against the denying row's.
func TestCPUSectionRowsOwnSamples(t *testing.T) {
	res := &results{}
	for k, sc := range cpuScenarios() {
		row := cpuRow{Scenario: sc, Runs: map[string][]cpuRun{}, Plain: map[string][]cpuRun{}, Slice: time.Second}
		for _, srv := range cpuServers[1:] {
			over := float64(k + 1)
			if srv.name == cpuEdgelimit {
				over = float64(k + 5)
			}
			for slice := range 4 {
				plainCPU := time.Duration(20_000+1000*slice) * time.Millisecond // 20 µs a request, and more
				row.Plain[srv.name] = append(row.Plain[srv.name], cpuRun{Requests: 1e6, CPU: plainCPU})
				row.Runs[srv.name] = append(row.Runs[srv.name], cpuRun{Requests: 1e6, CPU: time.Duration(float64(plainCPU) * (1 + over/100))})
			}
		}
		res.CPU = append(res.CPU, row)
	}
	var b strings.Builder
	cpuSection(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }, res)
	out := b.String()
	for k, sc := range cpuScenarios() {
		other, ours := fmt.Sprintf("**+%d.0%%** ± 0.0%%", k+1), fmt.Sprintf("**+%d.0%%** ± 0.0%%", k+5)
		want := fmt.Sprintf("| %s | %s | %s | %s | %s |", sc.Name, other, other, other, ours)
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if want := "an allowed request **+5.0%** ± 0.0%, a denied one **+6.0%** ± 0.0%."; !strings.Contains(out, want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
}

// The micro section shows the hot key with a busy process beside it, in
// its own column and in the ratios over the best peer.
func TestMicroSectionBusy(t *testing.T) {
	res := &results{Micro: benchResults{}, MicroBusy: benchResults{}}
	for c, ns := range map[string]float64{"edgelimit/sliding_window": 20, "uber-ratelimit": 25} {
		for _, s := range microShapes {
			res.Micro[s.bench+"/"+c] = map[string][]float64{"ns/op": {ns}}
		}
		res.MicroBusy["BenchmarkHotKey/"+c] = map[string][]float64{"ns/op": {2 * ns}}
	}
	var b strings.Builder
	microSection(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }, res)
	out := b.String()
	for _, want := range []string{
		"| edgelimit/sliding_window | 20 | 20 | 20 | 40 | 0 | — |",
		"| uber-ratelimit | 25 | 25 | 25 | 50 | 0 | — |",
		"| hot key, busy process beside it, ns/op | uber-ratelimit (50) | 0.80 | 0.80 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
