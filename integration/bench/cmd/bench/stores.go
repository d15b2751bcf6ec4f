package main

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Where the stores stage's Redis and gossip listen.
const (
	redisAddr  = "127.0.0.1:18470"
	gossipAddr = "127.0.0.1:18471"
)

// A storeCase is where edgelimit keeps a rule's state: in the process, in
// a one-node gossip cluster (the sharing's bookkeeping on every request,
// no peer to share with), or in Redis (a round trip per request).
type storeCase struct {
	Name string
	App  map[string]any // the rate_limit app
	Rule map[string]any // added to the rule
}

func storeCases() []storeCase {
	return []storeCase{
		{Name: "local"},
		{Name: "cluster (gossip)", App: map[string]any{"cluster": map[string]any{"bind": gossipAddr}}},
		{Name: "redis", App: map[string]any{"store": map[string]any{"redis": map[string]any{"addresses": []string{redisAddr}}}},
			Rule: map[string]any{"store": "redis"}},
	}
}

// storeRow is one store under one traffic shape: one result per round.
type storeRow struct {
	Store, Shape string
	Runs         []wrkResult
}

// runStores measures edgelimit allowing every request, its state in each
// store, with one key and with 200,000, cfg.Rounds times in rotated order.
// Redis runs on core 0 with the server (a Redis on the same host), wrk on
// core 1.
func runStores(binDir, dir string, cfg e2eConfig) ([]storeRow, error) {
	stop, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	shapes := []scenario{
		{Name: "one key", Limit: 100_000, Window: time.Second, Key: "ip"},
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
				r, err := measureStore(binDir, dir, sh, cases[c], cfg)
				if err != nil {
					return nil, err
				}
				row := &rows[i*len(cases)+c]
				log.Printf("round %d, %s, %s: %.0f req/s, p50 %v, p99 %v, %d denied, %d errors", round+1, sh.Name, cases[c].Name, r.RPS, r.P50, r.P99, r.Denied, r.Errors)
				row.Runs = append(row.Runs, r)
			}
		}
	}
	return rows, nil
}

func measureStore(binDir, dir string, sh scenario, sc storeCase, cfg e2eConfig) (wrkResult, error) {
	work, err := os.MkdirTemp(dir, "store-")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.RemoveAll(work)
	h := handlers(edgelimit, sh)
	rule := h[0]["rules"].([]any)[0].(map[string]any)
	for k, v := range sc.Rule {
		rule[k] = v
	}
	s, err := startAt(edgelimit.path(binDir), serverAddr, adminAddr, h, sc.App, 0, work)
	if err != nil {
		return wrkResult{}, err
	}
	defer s.stop()
	if _, err := runWrk(dir, sh.Script, cfg.Warm, 1); err != nil {
		return wrkResult{}, err
	}
	return runWrk(dir, sh.Script, cfg.Duration, 1)
}

// startRedis runs Debian's redis-server (installed when missing) on core 0,
// without persistence, and returns how to stop it.
func startRedis(dir string) (func(), error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if err := aptInstall("redis-server"); err != nil {
			return nil, err
		}
	}
	host, port, _ := net.SplitHostPort(redisAddr)
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", "-c", "0", "redis-server", "--bind", host, "--port", port,
		"--save", "", "--appendonly", "no", "--dir", data)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", redisAddr); err == nil {
			c.Close()
			return stop, nil
		}
	}
	stop()
	return nil, fmt.Errorf("redis-server did not listen on %s in 10 s", redisAddr)
}

// storesSection reports the stores stage.
func storesSection(p printer, res *results) {
	if len(res.Stores) == 0 {
		return
	}
	p("### Where the state lives: local, gossip, Redis\n\n")
	p("edgelimit alone, every request allowed (one key at 100,000/s, or 200,000 keys at 100/min), its rule's state in the process (`local`), ")
	p("in a one-node gossip cluster (`cluster { bind … }`: the share lookup and tracking on every request, no peer), or in Redis (`store redis`: one round trip to a `redis-server` on the same host, pinned to core 0 with the server). ")
	n := 0
	for _, row := range res.Stores {
		n = max(n, len(row.Runs))
	}
	p("Same harness as above, %d rounds; ×local is taken within a round.\n\n", n)
	p("| traffic | store | req/s | ×local | p50 / p99 ms |\n|---|---|---|---|---|\n")
	local := map[string][]float64{}
	for _, row := range res.Stores {
		if row.Store == "local" {
			local[row.Shape] = rpsOf(row.Runs)
		}
	}
	for _, row := range res.Stores {
		p50, p99 := latencies(row.Runs)
		p("| %s | %s | %s | %s | %s / %s |\n", row.Shape, row.Store, figure(rpsOf(row.Runs)), ratio(ratios(rpsOf(row.Runs), local[row.Shape])), num(median(p50)), num(median(p99)))
	}
	p("\n")
}
