package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The exactness check across a fleet: fleetSize Caddy processes share the
// limit of one key, exactConns connections spread over them send
// exactRequests requests in all.
const (
	fleetSize = 3
	// fleetPace is how long the paced rows spread their requests over:
	// long enough for several of caddy-ratelimit's syncs.
	fleetPace = 20 * time.Second
	// Process i of a fleet listens on fleetPort+i, its admin endpoint on
	// fleetPort+10+i.
	fleetPort = 18500
)

// A fleetCase is how a fleet shares its limit, and how fast it is sent.
type fleetCase struct {
	Bin     binary
	Sharing string // how the processes share the limit (Markdown)
	// Interval is caddy-ratelimit's distributed read_interval and
	// write_interval; 0 leaves both to its default (5s).
	Interval time.Duration
	Pace     time.Duration // spread the requests over Pace; 0: as fast as they go
}

// fleetCases: edgelimit with store redis, caddy-ratelimit distributed with
// its default sync intervals and with 1s ones; each as fast as the
// connections go (done within the intervals), then paced over fleetPace.
func fleetCases() []fleetCase {
	var cases []fleetCase
	for _, pace := range []time.Duration{0, fleetPace} {
		cases = append(cases,
			fleetCase{Bin: edgelimit, Sharing: "`store redis`", Pace: pace},
			fleetCase{Bin: ratelimit, Sharing: "`distributed` (default: write, read 5s)", Pace: pace},
			fleetCase{Bin: ratelimit, Sharing: "`distributed`, write, read 1s", Interval: time.Second, Pace: pace},
		)
	}
	return cases
}

// fleetHandlers is the route of every process of a fleet of c: the
// exactness scenario's, sharing through Redis (edgelimit) or through the
// file_system storage at storage (caddy-ratelimit, whose handler takes a
// storage of its own: processes with the same one form a cluster).
func fleetHandlers(c fleetCase, storage string) []map[string]any {
	h := handlers(c.Bin, scenario{Limit: exactLimit, Window: time.Hour, Key: "ip"})
	switch c.Bin {
	case edgelimit:
		h[0]["rules"].([]any)[0].(map[string]any)["store"] = "redis"
	case ratelimit:
		distributed := map[string]any{}
		if c.Interval > 0 {
			distributed["write_interval"] = c.Interval.String()
			distributed["read_interval"] = c.Interval.String()
		}
		h[0]["distributed"] = distributed
		h[0]["storage"] = map[string]any{"module": "file_system", "root": storage}
	}
	return h
}

// fleetApp is the rate_limit app of a fleet of c: edgelimit's store block
// naming the stage's Redis.
func fleetApp(c fleetCase) map[string]any {
	if c.Bin != edgelimit {
		return nil
	}
	return map[string]any{"store": map[string]any{"redis": map[string]any{"addresses": []string{redisAddr}}}}
}

// runFleet runs each fleet case exactRounds times, each round from a clean
// state: a Redis of its own, a storage of its own, new instance IDs.
func runFleet(binDir, dir string) ([]exactRow, error) {
	var rows []exactRow
	for _, c := range fleetCases() {
		row := exactRow{Bin: c.Bin, Processes: fleetSize, Sharing: c.Sharing, Pace: c.Pace}
		for range exactRounds {
			r, err := fleetOnce(binDir, dir, c)
			if err != nil {
				return nil, err
			}
			row.Admitted = append(row.Admitted, r.admitted)
			row.Denied = append(row.Denied, r.denied)
			row.Other += r.other
			row.Took = append(row.Took, r.took)
			if c.Bin == edgelimit {
				row.Fallbacks = append(row.Fallbacks, r.fallbacks)
			}
		}
		log.Printf("exactness, %d × %s, %s, %s: admitted %v of %d (limit %d), denied %v, %d other, Redis fallbacks %v, took %v",
			fleetSize, c.Bin, c.Sharing, loadOf(c.Pace), row.Admitted, exactRequests, exactLimit, row.Denied, row.Other, row.Fallbacks, row.Took)
		rows = append(rows, row)
	}
	return rows, nil
}

// fleetRun is one round of a fleet case.
type fleetRun struct {
	admitted, denied, other int64
	fallbacks               int64 // edgelimit: requests Redis did not decide
	took                    time.Duration
}

func fleetOnce(binDir, dir string, c fleetCase) (fleetRun, error) {
	var r fleetRun
	work, err := os.MkdirTemp(dir, "fleet-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(work)
	if c.Bin == edgelimit {
		stop, _, err := startRedis(work, redisAddr, 0)
		if err != nil {
			return r, err
		}
		defer stop()
	}
	storage := filepath.Join(work, "storage")
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	var urls []string
	for i := range fleetSize {
		// A directory of its own per process: its HOME and XDG dirs, so
		// its own Caddy instance ID (caddy-ratelimit skips the state
		// file bearing its own).
		node := filepath.Join(work, "node"+strconv.Itoa(i))
		if err := os.Mkdir(node, 0o755); err != nil {
			return r, err
		}
		listen := fmt.Sprintf("127.0.0.1:%d", fleetPort+i)
		admin := fmt.Sprintf("127.0.0.1:%d", fleetPort+10+i)
		s, err := startAt(c.Bin.path(binDir), listen, admin, fleetHandlers(c, storage), fleetApp(c), -1, node)
		if err != nil {
			return r, err
		}
		servers = append(servers, s)
		urls = append(urls, "http://"+listen+"/")
	}
	// Each process's readiness probe was one request of the key: count
	// them.
	r.admitted = fleetSize
	var ok, denied, bad atomic.Int64
	r.took = fleetSend(urls, exactConns, exactRequests-fleetSize, c.Pace, func(code int) {
		switch code {
		case http.StatusOK:
			ok.Add(1)
		case http.StatusTooManyRequests:
			denied.Add(1)
		default:
			bad.Add(1)
		}
	})
	if ok.Load() == 0 {
		return r, fmt.Errorf("%d × %s (%s) admitted nothing", fleetSize, c.Bin, c.Sharing)
	}
	r.admitted += ok.Load()
	r.denied, r.other = denied.Load(), bad.Load()
	switch c.Bin {
	case edgelimit:
		for _, s := range servers {
			n, err := fallbacks(s.admin)
			if err != nil {
				return r, err
			}
			r.fallbacks += n
		}
	case ratelimit:
		// The processes' state files: one each once they have written.
		states, _ := filepath.Glob(filepath.Join(storage, "rate_limit", "instances", "*.rlstate"))
		log.Printf("%d × %s, %s: %d state files in the shared storage after %v", fleetSize, c.Bin, c.Sharing, len(states), r.took.Round(time.Millisecond))
	}
	return r, nil
}

// fleetSend is send of GET requests, connection c's to urls[c%len(urls)].
func fleetSend(urls []string, conns int, total int64, pace time.Duration, status func(code int)) time.Duration {
	return send(conns, total, pace, func(c int, _ int64) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, urls[c%len(urls)], nil)
		return req
	}, status)
}

// fallbacks is how many requests of edgelimit's rules with store redis
// the server at admin has decided without Redis, from its metrics.
func fallbacks(admin string) (int64, error) {
	sums, err := scrape(admin, "caddy_rate_limit_store_fallbacks_total", "")
	return sums[""], err
}

// exactSections is the exactness section: one process (exactSection),
// then the fleets.
func exactSections(p printer, res *results) {
	var single, fleet []exactRow
	for _, e := range res.Exact {
		if e.Processes > 0 {
			fleet = append(fleet, e)
		} else {
			single = append(single, e)
		}
	}
	exactSection(p, &results{Exact: single})
	if len(fleet) == 0 {
		return
	}
	if len(single) == 0 {
		p("### Exactness under concurrency\n\n")
	}
	n := fleet[0].Processes
	p("Across a fleet: %d Caddy processes share the limit of the one key (%d an hour); the same %d connections, spread over them (%s), send %d requests in all, the processes' readiness probes included, ",
		n, exactLimit, exactConns, connSplit(exactConns, n), exactRequests)
	p("as fast as they go or paced evenly over %v. Each round starts from a clean state. ", fleetPace)
	p("edgelimit: a rule with `store redis`, one `redis-server` (pinned to core 0) for the fleet, `on_store_error` left at `local` (a request Redis does not decide within the 50 ms timeout is decided by its process alone: counted as a Redis fallback). ")
	p("caddy-ratelimit: `distributed`, its processes sharing one `file_system` storage (the handler's `storage`), each with an instance ID of its own; each writes its counts every `write_interval` and reads the others' every `read_interval`, and admits while its own count plus the others' last read is below the limit. ")
	p("Every run lies within the first hour window: admitted is that window's count. Per round:\n\n")
	p("| plugin | sharing | requests | admitted | × limit | 429 | other than 200/429 | Redis fallbacks | load took, s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range fleet {
		var x, took []float64
		for _, a := range e.Admitted {
			x = append(x, float64(a)/exactLimit)
		}
		for _, t := range e.Took {
			took = append(took, t.Seconds())
		}
		fb := "—"
		if e.Fallbacks != nil {
			fb = fmt.Sprint(e.Fallbacks)
		}
		p("| %s | %s | %s | %v | %s | %v | %d | %s | %s |\n", e.Bin, e.Sharing, loadOf(e.Pace), e.Admitted, times(x), e.Denied, e.Other, fb, figure(took))
	}
	p("\n")
}

// loadOf says how a fleet's requests were sent.
func loadOf(pace time.Duration) string {
	if pace > 0 {
		return fmt.Sprintf("paced over %v", pace)
	}
	return "as fast as they go"
}

// times is a ratio's median with its range, "2.95 (2.90–3.01)".
func times(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := spread(vs)
	if lo == hi {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(vs), lo, hi)
}

// connSplit is how fleetSend spreads conns connections over n processes,
// "22, 21, 21".
func connSplit(conns, n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = strconv.Itoa(conns/n + min(1, max(0, conns%n-i)))
	}
	return strings.Join(parts, ", ")
}
