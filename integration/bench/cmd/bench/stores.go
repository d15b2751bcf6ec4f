package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Where the stores stage's Redis servers and gossip listen: redisAddr's
// Redis runs on core 0 with the server (a Redis on the same host),
// redisFarAddr's on core 1 with wrk (the server's core its own, as with
// a Redis on another host).
const (
	redisAddr    = "127.0.0.1:18470"
	gossipAddr   = "127.0.0.1:18471"
	redisFarAddr = "127.0.0.1:18472"
)

// A storeCase is where edgelimit keeps a rule's state: in the process, in
// a one-node gossip cluster (the sharing's bookkeeping on every request,
// no peer to share with), or in Redis (a script per request).
type storeCase struct {
	Name string
	App  map[string]any // the rate_limit app
	Rule map[string]any // added to the rule
	Far  bool           // its Redis is redisFarAddr's, on wrk's core
}

func storeCases() []storeCase {
	return []storeCase{
		{Name: "local"},
		{Name: "cluster (gossip)", App: map[string]any{"cluster": map[string]any{"bind": gossipAddr}}},
		{Name: "redis", App: map[string]any{"store": map[string]any{"redis": map[string]any{"addresses": []string{redisAddr}}}},
			Rule: map[string]any{"store": "redis"}},
		{Name: "redis, coalesce on", App: map[string]any{"store": map[string]any{"redis": map[string]any{
			"addresses": []string{redisAddr}, "coalesce": true}}},
			Rule: map[string]any{"store": "redis"}},
		{Name: "redis, pipeline off", App: map[string]any{"store": map[string]any{"redis": map[string]any{
			"addresses": []string{redisAddr}, "no_pipeline": true}}},
			Rule: map[string]any{"store": "redis"}},
		{Name: "redis, on wrk's core", App: map[string]any{"store": map[string]any{"redis": map[string]any{"addresses": []string{redisFarAddr}}}},
			Rule: map[string]any{"store": "redis"}, Far: true},
	}
}

// storeRow is one store under one traffic shape: one result per round.
type storeRow struct {
	Store, Shape string
	Runs         []wrkResult
	Via          []map[string]int64 `json:",omitempty"` // per round, Redis rules' requests by how decided (caddy_rate_limit_store_requests_total), and "round_trips" (caddy_rate_limit_store_round_trips_total)
	CPU          []storeCPU         `json:",omitempty"` // per round
}

// storeCPU is the time on a core per request of the measured run: the
// server's, and redis-server's (0 for a store without Redis).
type storeCPU struct {
	ServerUS, RedisUS float64
}

// runStores measures edgelimit with its state in each store, on one key
// allowing, one key mostly denying, and 200,000 keys allowing, cfg.Rounds
// times in rotated order.
// One Redis runs on core 0 with the server (a Redis on the same host),
// another on core 1 with wrk (the "on wrk's core" case).
func runStores(binDir, dir string, cfg e2eConfig) ([]storeRow, error) {
	stop, near, err := startRedis(dir, redisAddr, 0)
	if err != nil {
		return nil, err
	}
	defer stop()
	stopFar, far, err := startRedis(dir, redisFarAddr, 1)
	if err != nil {
		return nil, err
	}
	defer stopFar()
	shapes := []scenario{
		{Name: "one key, one connection", Limit: 100_000, Window: time.Second, Key: "ip", Conns: 1},
		{Name: "one key", Limit: 100_000, Window: time.Second, Key: "ip"},
		{Name: "one key at 1000/s, most denied", Limit: 1000, Window: time.Second, Key: "ip"},
		{Name: "one key at 100/min, flooded", Limit: 100, Window: time.Minute, Key: "ip"},
		{Name: "200,000 keys", Script: "keys.lua", Limit: 100, Window: time.Minute, Key: "header"},
	}
	cases := storeCases()
	var rows []storeRow
	for _, sh := range shapes {
		for _, sc := range cases {
			rows = append(rows, storeRow{Store: sc.Name, Shape: sh.Name})
		}
	}
	for round := range cfg.Rounds {
		for i, sh := range shapes {
			for k := range cases {
				c := (k + round) % len(cases)
				redisPID := near
				if cases[c].Far {
					redisPID = far
				}
				r, via, cpu, err := measureStore(binDir, dir, sh, cases[c], cfg, redisPID)
				if err != nil {
					return nil, err
				}
				row := &rows[i*len(cases)+c]
				log.Printf("round %d, %s, %s: %.0f req/s, p50 %v, p99 %v, %d denied, %d errors, redis %v", round+1, sh.Name, cases[c].Name, r.RPS, r.P50, r.P99, r.Denied, r.Errors, via)
				row.Runs = append(row.Runs, r)
				row.CPU = append(row.CPU, cpu)
				if via != nil {
					row.Via = append(row.Via, via)
				}
			}
		}
	}
	return rows, nil
}

// measureStore loads edgelimit with sc's store for cfg.Duration after a
// warm-up, and reads the time the server and redis-server (pid) spent on
// a core per request; for a Redis rule, it also reads how the measured
// requests were decided (a call each, coalesced, or the over-limit cache).
func measureStore(binDir, dir string, sh scenario, sc storeCase, cfg e2eConfig, redisPID int) (wrkResult, map[string]int64, storeCPU, error) {
	var cpu storeCPU
	work, err := os.MkdirTemp(dir, "store-")
	if err != nil {
		return wrkResult{}, nil, cpu, err
	}
	defer os.RemoveAll(work)
	h := handlers(edgelimit, sh)
	rule := h[0]["rules"].([]any)[0].(map[string]any)
	for k, v := range sc.Rule {
		rule[k] = v
	}
	s, err := startAt(edgelimit.path(binDir), serverAddr, adminAddr, h, sc.App, 0, work)
	if err != nil {
		return wrkResult{}, nil, cpu, err
	}
	defer s.stop()
	if _, err := runWrk(dir, sh.Script, cfg.Warm, 1); err != nil {
		return wrkResult{}, nil, cpu, err
	}
	conns := sh.Conns
	if conns == 0 {
		conns = loadConns
	}
	redis := sc.Rule["store"] == "redis"
	var before map[string]int64
	if redis {
		if before, err = storeVia(adminAddr); err != nil {
			return wrkResult{}, nil, cpu, err
		}
	}
	server0, err := s.cpuTime()
	if err != nil {
		return wrkResult{}, nil, cpu, err
	}
	redis0, err := procCPU(redisPID)
	if err != nil {
		return wrkResult{}, nil, cpu, err
	}
	r, err := runWrkConns(dir, sh.Script, cfg.Duration, 1, conns)
	if err != nil {
		return r, nil, cpu, err
	}
	server1, err := s.cpuTime()
	if err != nil {
		return r, nil, cpu, err
	}
	redis1, err := procCPU(redisPID)
	if err != nil {
		return r, nil, cpu, err
	}
	if r.Requests > 0 {
		per := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(r.Requests) }
		cpu = storeCPU{ServerUS: per(server1 - server0), RedisUS: per(redis1 - redis0)}
	}
	if !redis {
		return r, nil, cpu, nil
	}
	after, err := storeVia(adminAddr)
	for k := range after {
		after[k] -= before[k]
	}
	return r, after, cpu, err
}

// storeVia reads caddy_rate_limit_store_requests_total from an admin
// endpoint's metrics: requests of Redis rules by how they were decided;
// and, as "round_trips", caddy_rate_limit_store_round_trips_total.
func storeVia(admin string) (map[string]int64, error) {
	via, err := scrape(admin, "caddy_rate_limit_store_requests_total", "via")
	if err != nil {
		return nil, err
	}
	trips, err := scrape(admin, "caddy_rate_limit_store_round_trips_total", "")
	via["round_trips"] = trips[""]
	return via, err
}

// startRedis runs Debian's redis-server (installed when missing) on addr,
// pinned to core, without persistence, and returns how to stop it and its
// pid.
func startRedis(dir, addr string, core int) (func(), int, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if err := aptInstall("redis-server"); err != nil {
			return nil, 0, err
		}
	}
	host, port, _ := net.SplitHostPort(addr)
	data := filepath.Join(dir, "redis-"+port)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, 0, err
	}
	cmd := exec.Command("taskset", "-c", strconv.Itoa(core), "redis-server", "--bind", host, "--port", port,
		"--save", "", "--appendonly", "no", "--dir", data)
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return stop, cmd.Process.Pid, nil
		}
	}
	stop()
	return nil, 0, fmt.Errorf("redis-server did not listen on %s in 10 s", addr)
}

// storesSection reports the stores stage.
func storesSection(p printer, res *results) {
	if len(res.Stores) == 0 {
		return
	}
	p("### Where the state lives: local, gossip, Redis\n\n")
	p("edgelimit alone, with one key at 100,000/s (every request allowed: over one connection, where the latency is a request's own with no queueing, then over %d), one key at 1000/s (most denied, each denial's wait about a millisecond), one key at 100/min (flooded: nearly all denied, with waits of seconds), or 200,000 keys at 100/min (every request allowed), its rule's state in the process (`local`), ", loadConns)
	p("in a one-node gossip cluster (`cluster { bind … }`: the share lookup and tracking on every request, no peer), or in Redis (`store redis`: a script per request in a `redis-server` on the same host, pinned to core 0 with the server). ")
	n := 0
	for _, row := range res.Stores {
		n = max(n, len(row.Runs))
	}
	p("Same harness as above, %d rounds; ×local is taken within a round.\n\n", n)
	p("`redis` is the default (pipelining and the over-limit cache on, coalescing off); `redis, coalesce on` adds coalescing; `redis, pipeline off` sends each call in a round trip of its own (`no_pipeline`); `redis, on wrk's core` is the default with its `redis-server` pinned to core 1 with wrk instead: the server's core is its own, as with a Redis on another host (wrk and Redis share core 1). ")
	p("Per 100 requests, over the measured run: Redis calls, from `caddy_rate_limit_store_requests_total` (the rest were coalesced into another request's call, or denied by the over-limit cache), and round trips, from `caddy_rate_limit_store_round_trips_total` (pipelined calls share one).\n\n")
	p("CPU per request: the time the server's process (edgelimit, on core 0) and `redis-server` (on core 0 too, but for `on wrk's core`) spent on a core over the measured run, divided by its requests (from `/proc/<pid>/task/*/schedstat`), median of the rounds: with Redis on the server's core, req/s is about 1 ÷ their sum.\n\n")
	p("| traffic | store | req/s | ×local | p50 / p99 ms | Redis calls / round trips per 100 requests | CPU µs per request: server / Redis |\n|---|---|---|---|---|---|---|\n")
	local := map[string][]float64{}
	for _, row := range res.Stores {
		if row.Store == "local" {
			local[row.Shape] = rpsOf(row.Runs)
		}
	}
	for _, row := range res.Stores {
		p50, p99 := latencies(row.Runs)
		p("| %s | %s | %s | %s | %s / %s | %s | %s |\n", row.Shape, row.Store, figure(rpsOf(row.Runs)), ratio(ratios(rpsOf(row.Runs), local[row.Shape])), num(median(p50)), num(median(p99)), callsPer100(row.Via), cpuPerRequest(row.CPU))
	}
	p("\n")
}

// cpuPerRequest is the medians, over rounds, of the server's and Redis's
// CPU µs per request; "—" when not measured.
func cpuPerRequest(cpu []storeCPU) string {
	var server, redis []float64
	for _, c := range cpu {
		if c.ServerUS > 0 {
			server = append(server, c.ServerUS)
			redis = append(redis, c.RedisUS)
		}
	}
	if len(server) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f / %.1f", median(server), median(redis))
}

// callsPer100 is the median, over rounds, of Redis calls and of round
// trips per 100 requests of a Redis rule; "—" for other stores.
func callsPer100(via []map[string]int64) string {
	var calls, trips []float64
	for _, v := range via {
		if all := v["call"] + v["coalesced"] + v["over_limit_cache"]; all > 0 {
			calls = append(calls, 100*float64(v["call"])/float64(all))
			trips = append(trips, 100*float64(v["round_trips"])/float64(all))
		}
	}
	if len(calls) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f / %.1f", median(calls), median(trips))
}
