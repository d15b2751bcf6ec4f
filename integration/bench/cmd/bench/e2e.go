package main

import (
	"fmt"
	"log"
	"os"
	"time"
)

// e2eConfig is how long and how often the end-to-end rows run.
type e2eConfig struct {
	Rounds   int           // each row runs once per round, binaries in rotated order
	Duration time.Duration // measured wrk run
	Warm     time.Duration // unmeasured wrk run before it, on the same server
}

// e2eRow is one scenario's runs: per binary, one result per round.
type e2eRow struct {
	Scenario scenario
	Runs     map[binary][]wrkResult
}

// plainKey is the plain-Caddy runs a scenario compares with: its own,
// one a round, made beside its other binaries' runs. (Plain Caddy ignores
// limits, but a run shared by the rows of one traffic shape was made
// minutes before some of them: "large limit, allowing" read 0.75× plain
// where "one key, allowing", the same traffic beside its plain run, read
// 0.98×, on a host whose speed drifted meanwhile.)
func plainKey(sc scenario) string {
	return sc.Name
}

// runE2E runs every scenario for the three binaries, cfg.Rounds times,
// alternating the order of the binaries from round to round. The server
// runs on core 0, wrk on core 1.
func runE2E(binDir, dir string, cfg e2eConfig) ([]e2eRow, map[string][]wrkResult, error) {
	// Probe plain Caddy's throughput to set the denying limit.
	probe, err := measure(binDir, dir, plain, scenario{Name: "probe"}, cfg)
	if err != nil {
		return nil, nil, err
	}
	denyLimit := int64(probe.RPS / 10)
	log.Printf("plain Caddy: %.0f req/s; the denying one-key limit is %d/s", probe.RPS, denyLimit)

	scs := scenarios(denyLimit)
	rows := make([]e2eRow, len(scs))
	for i, sc := range scs {
		rows[i] = e2eRow{Scenario: sc, Runs: map[binary][]wrkResult{}}
	}
	plainRuns := map[string][]wrkResult{}
	order := []binary{plain, edgelimit, ratelimit}
	for round := range cfg.Rounds {
		for i, sc := range scs {
			for k := range order {
				bin := order[(k+round+i)%len(order)]
				r, err := measure(binDir, dir, bin, sc, cfg)
				if err != nil {
					return nil, nil, err
				}
				log.Printf("round %d, %s, %s: %.0f req/s, p50 %v, p99 %v, %d of %d denied, %d errors",
					round+1, sc.Name, bin, r.RPS, r.P50, r.P99, r.Denied, r.Requests, r.Errors)
				if bin == plain {
					plainRuns[plainKey(sc)] = append(plainRuns[plainKey(sc)], r)
				} else {
					rows[i].Runs[bin] = append(rows[i].Runs[bin], r)
				}
			}
		}
	}
	return rows, plainRuns, nil
}

// measure starts bin for sc, warms it, and loads it for cfg.Duration.
func measure(binDir, dir string, bin binary, sc scenario, cfg e2eConfig) (wrkResult, error) {
	work, err := os.MkdirTemp(dir, "run-")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.RemoveAll(work)
	if sc.Upstream {
		up, err := startAt(plain.path(binDir), upstreamAddr, upstreamAdminAddr, []map[string]any{respond}, nil, 0, work)
		if err != nil {
			return wrkResult{}, err
		}
		defer up.stop()
	}
	s, err := start(bin.path(binDir), handlers(bin, sc), 0, work)
	if err != nil {
		return wrkResult{}, err
	}
	defer s.stop()
	if sc.TouchAll && bin != plain {
		if err := touchAll(scriptKeys); err != nil {
			return wrkResult{}, err
		}
	}
	if _, err := runWrk(dir, sc.Script, cfg.Warm, 1); err != nil {
		return wrkResult{}, err
	}
	r, err := runWrk(dir, sc.Script, cfg.Duration, 1)
	if err != nil {
		return r, fmt.Errorf("%s, %s: %w", sc.Name, bin, err)
	}
	return r, nil
}
