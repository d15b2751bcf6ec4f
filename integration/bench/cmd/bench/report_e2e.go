package main

import (
	"fmt"
	"time"
)

// rpsOf and friends pick one figure out of each run.
func rpsOf(rs []wrkResult) []float64 {
	var vs []float64
	for _, r := range rs {
		vs = append(vs, r.RPS)
	}
	return vs
}

func latencies(rs []wrkResult) (p50, p99 []float64) {
	for _, r := range rs {
		p50 = append(p50, float64(r.P50)/float64(time.Millisecond))
		p99 = append(p99, float64(r.P99)/float64(time.Millisecond))
	}
	return p50, p99
}

// ratios are a/b run by run (the runs of one round go together).
func ratios(a, b []float64) []float64 {
	var vs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			vs = append(vs, a[i]/b[i])
		}
	}
	return vs
}

// deniedShare is the share of responses that were not 2xx, over all runs.
func deniedShare(rs []wrkResult) string {
	var denied, total, errors int64
	for _, r := range rs {
		denied += r.Denied
		total += r.Requests
		errors += r.Errors
	}
	if total == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.1f%%", 100*float64(denied)/float64(total))
	if errors > 0 {
		s += fmt.Sprintf(" (%d socket errors)", errors)
	}
	return s
}

func ratio(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := spread(vs)
	return fmt.Sprintf("**%.2f** (%.2f–%.2f)", median(vs), lo, hi)
}

func e2eSection(p printer, res *results) {
	if len(res.E2E) == 0 {
		return
	}
	p("### End to end: three Caddy binaries\n\n")
	p("Caddy %s built three ways from the benchmark module: `plain` (standard modules), `edgelimit` (this plugin), `caddy-ratelimit` (`github.com/mholt/caddy-ratelimit` v0.1.0, upgraded to this Caddy). ", res.Env.Caddy)
	p("Each serves `static_response \"ok\"` on 127.0.0.1 with logs at ERROR, pinned to core 0 with GOMAXPROCS=1; ")
	p("wrk (one thread, %d connections) runs pinned to core 1. Each row runs once per round, %d rounds, the binaries (plain Caddy too: a row is set against its own plain runs) in a rotated order; ", loadConns, rounds(res))
	p("each run is a fresh server, a 1 s warm-up, then the measured run. Ratios are taken within a round, then the median (range) over rounds.\n\n")
	p("Limits, the same for both limiters: \"one key\" keys by client IP (everything comes from 127.0.0.1); \"200,000 keys\" keys by an `X-Client` header that wrk sets per request, round robin; ")
	p("caddy-ratelimit's `max_events` and `window` are the limit. The 90%%-denied rows: one key at a tenth of plain Caddy's throughput per second; ")
	p("200,000 keys at 1 per hour, all sent once before the run, then nine requests in ten on those keys and one in ten on a new key. ")
	p("The last row proxies to an upstream (plain Caddy serving \"ok\", on the same core) instead of answering: what a denial saves when the response has a cost.\n\n")
	p("| traffic, limit | plain req/s | edgelimit req/s | caddy-ratelimit req/s | edgelimit ×plain | caddy-ratelimit ×plain | edgelimit ÷ caddy-ratelimit |\n|---|---|---|---|---|---|---|\n")
	for _, row := range res.E2E {
		plainRPS := rpsOf(res.Plain[plainKey(row.Scenario)])
		ours, theirs := rpsOf(row.Runs[edgelimit]), rpsOf(row.Runs[ratelimit])
		p("| %s | %s | %s | %s | %s | %s | %s |\n", row.Scenario.Name, figure(plainRPS), figure(ours), figure(theirs),
			ratio(ratios(ours, plainRPS)), ratio(ratios(theirs, plainRPS)), ratio(ratios(ours, theirs)))
	}
	p("\nLatency under that load (closed loop: %d connections as fast as the server answers, so the median is mostly queueing), and the share of responses denied:\n\n", loadConns)
	p("| traffic, limit | plain p50 / p99 ms | edgelimit p50 / p99 ms | caddy-ratelimit p50 / p99 ms | denied: edgelimit | denied: caddy-ratelimit |\n|---|---|---|---|---|---|\n")
	for _, row := range res.E2E {
		pp50, pp99 := latencies(res.Plain[plainKey(row.Scenario)])
		o50, o99 := latencies(row.Runs[edgelimit])
		t50, t99 := latencies(row.Runs[ratelimit])
		p("| %s | %s / %s | %s / %s | %s / %s | %s | %s |\n", row.Scenario.Name,
			num(median(pp50)), num(median(pp99)), num(median(o50)), num(median(o99)), num(median(t50)), num(median(t99)),
			deniedShare(row.Runs[edgelimit]), deniedShare(row.Runs[ratelimit]))
	}
	p("\n")
}

// rounds is how many rounds the end-to-end rows ran.
func rounds(res *results) int {
	n := 0
	for _, row := range res.E2E {
		n = max(n, len(row.Runs[edgelimit]))
	}
	return n
}

func memorySection(p printer, res *results) {
	if len(res.Memory) == 0 {
		return
	}
	p("### Memory per key, end to end\n\n")
	p("A server (core 0, GOMAXPROCS=1) with one rule keyed by `X-Client`, limit 100 a minute (caddy-ratelimit: `max_events` 100 or 1000, window 1 m), ")
	p("warmed for a second on one key; then %d requests, each with a key of its own. ", memoryKeys)
	p("RSS is VmRSS before and after; live heap is `HeapAlloc` from the admin endpoint's `/debug/vars` right after `/debug/pprof/heap?gc=1` collected. ")
	p("RSS counts pages touched (a ring that is allocated but never written is not resident), and the GC's headroom; the live heap is what the keys hold.\n\n")
	p("| configuration | RSS growth per 100,000 keys | RSS B/key | live heap B/key |\n|---|---|---|---|\n")
	for _, m := range res.Memory {
		p("| %s | %.1f MB | %.0f | %.0f |\n", m.Name, m.RSSPerKey*100_000/1e6, m.RSSPerKey, m.HeapPer)
	}
	p("\n")
}

func exactSection(p printer, res *results) {
	if len(res.Exact) == 0 {
		return
	}
	p("### Exactness under concurrency\n\n")
	p("One key (the client IP), a limit of %d an hour; %d connections send %d requests in all, as fast as they can; the server keeps both cores. Admitted, per run:\n\n", exactLimit, exactConns, exactRequests)
	p("| plugin | admitted | other than 200/429 |\n|---|---|---|\n")
	for _, e := range res.Exact {
		p("| %s | %v | %d |\n", e.Bin, e.Admitted, e.Other)
	}
	p("\n")
}
