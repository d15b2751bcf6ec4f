package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// cpuSection is the CPU per request tables.
func cpuSection(p printer, res *results) {
	if len(res.CPU) == 0 {
		return
	}
	p("### CPU per request, end to end\n\n")
	p("Six Caddy servers per row, each serving `static_response \"ok\"`: plain Caddy; a second copy of it; plain Caddy whose `static_response` also sends the RateLimit, RateLimit-Policy (and on a denial Retry-After) values edgelimit sent to a second request, a denial in the denying rows (\"plain + headers\"); edgelimit's rule with `headers off`; edgelimit; caddy-ratelimit (which sends no rate-limit headers on an allowed request). ")
	p("The six run at once, pinned to core 0 with GOMAXPROCS=1, after a 1 s warm-up each. ")
	p("In each slice of %v plain Caddy and one other server take load together, from two wrk processes on core 1 (one thread, %d connections each), the other server rotating; %d slices per server. ", cpuSliceLength(res), loadConns, cpuSliceCount(res))
	p("CPU per request is a server's time on the core (`/proc/<pid>/task/*/schedstat`, every thread, in ns) over the slice, divided by the requests it served: ")
	p("time the VM lost to steal or to the other server is not in it. ")
	p("The host's drift from second to second (±5–10%% here) falls on both servers of a slice alike, so their ratio is the figure; servers loaded one after the other moved ±13%% a pair on this VM, loaded together ±3%%.\n\n")
	p("Medians over the slices, with the interquartile range (the middle half of the slices); plain Caddy's are over all its slices.\n\n")
	p("| traffic, limit | plain µs/req | plain, a second copy | plain + headers | edgelimit, headers off | edgelimit | caddy-ratelimit |\n|---|---|---|---|---|---|---|\n")
	for _, row := range res.CPU {
		var all []cpuRun
		for _, srv := range cpuServers[1:] {
			all = append(all, row.Plain[srv.name]...)
		}
		p("| %s | %s |", row.Scenario.Name, quartileFigure(cpuPer(all)))
		for _, name := range []string{cpuPlainTwin, cpuPlainHeaders, cpuHeadersOff, cpuEdgelimit, cpuRatelimit} {
			p(" %s |", quartileFigure(cpuPer(row.Runs[name])))
		}
		p("\n")
	}
	p("\nEach server's CPU per request over that of plain Caddy in the same slice, less 1: the mean over the slices, ± two standard errors of it (the mean lies in that band 95 times in 100). ")
	p("\"The method\" is the second copy of plain Caddy: what the measurement reads where there is no difference. ")
	p("\"The headers\" is what sending edgelimit's header values costs plain Caddy; \"edgelimit's own\" is, slice by slice, edgelimit's ratio over the headers' ratio: what its handler adds beyond sending them.\n\n")
	p("| traffic, limit | the method | the headers | edgelimit, headers off | edgelimit | edgelimit's own | caddy-ratelimit | denied: edgelimit | denied: caddy-ratelimit |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range res.CPU {
		over := func(name string) []float64 { return cpuOver(row, name) }
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Scenario.Name,
			meanFigure(over(cpuPlainTwin)), meanFigure(over(cpuPlainHeaders)), meanFigure(over(cpuHeadersOff)),
			meanFigure(over(cpuEdgelimit)), meanFigure(ratios(over(cpuEdgelimit), over(cpuPlainHeaders))),
			meanFigure(over(cpuRatelimit)), cpuDenied(row.Runs[cpuEdgelimit]), cpuDenied(row.Runs[cpuRatelimit]))
	}
	byName := map[string]cpuRow{}
	for _, row := range res.CPU {
		byName[row.Scenario.Name] = row
	}
	allowing, denying := byName[cpuScenarios()[0].Name], byName[cpuScenarios()[1].Name]
	if a, d := cpuOver(allowing, cpuEdgelimit), cpuOver(denying, cpuEdgelimit); len(a) > 0 && len(d) > 0 {
		p("\nOne key, edgelimit, over plain Caddy serving \"ok\" beside it (targets: at most +3%% when allowing; a denial cheaper than an allowed request): ")
		p("an allowed request %s, a denied one %s. In µs, medians, %s allowed and %s denied; the two rows ran apart, each beside its own plain Caddy, so only the ratios compare.\n",
			meanFigure(a), meanFigure(d), num(median(cpuPer(allowing.Runs[cpuEdgelimit]))), num(median(cpuPer(denying.Runs[cpuEdgelimit]))))
	}
	p("\n")
}

// cpuOver is, slice by slice, the CPU per request of the server name of
// row over that of plain Caddy loaded beside it.
func cpuOver(row cpuRow, name string) []float64 {
	return ratios(cpuPer(row.Runs[name]), cpuPer(row.Plain[name]))
}

// meanSE is the mean of vs and its standard error.
func meanSE(vs []float64) (mean, se float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	if len(vs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range vs {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss/float64(len(vs)-1)) / math.Sqrt(float64(len(vs)))
}

// meanFigure is ratios vs less 1, in percent: their mean ± two standard
// errors, "**+2.1%** ± 0.9%".
func meanFigure(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	m, se := meanSE(vs)
	return fmt.Sprintf("**%+.1f%%** ± %.1f%%", 100*(m-1), 200*se)
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

// cpuSliceCount is how many slices a row had per server.
func cpuSliceCount(res *results) int {
	n := 0
	for _, row := range res.CPU {
		n = max(n, len(row.Runs[cpuEdgelimit]))
	}
	return n
}

// cpuSliceLength is how long a slice of the rows ran.
func cpuSliceLength(res *results) time.Duration {
	return res.CPU[0].Slice
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
