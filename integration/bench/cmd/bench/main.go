// Command bench measures edgelimit side by side with the limiters an
// operator would pick instead, on this machine, and writes the figures into
// BENCHMARKS.md at the repository's root. From this module's directory:
//
//	go run ./cmd/bench
//
// Stages, in order (-only picks some; the others' last results are read
// from results/, or if some stage has none there, the other stages'
// subsections of BENCHMARKS.md are left as they are):
//
//	micro     limiter microbenchmarks: edgelimit's algorithms, x/time/rate,
//	          httprate, uber ratelimit (package limiters), the hot key
//	          again with a busy process beside it, and the handler
//	          benchmark of the plugin's own module
//	accuracy  sliding_window against an exact sliding log on bursty traces
//	e2e       three Caddy v2.11.9 binaries (plain, edgelimit,
//	          caddy-ratelimit) under wrk, server on core 0, wrk on core 1
//	stores    edgelimit with its state local, in a one-node gossip
//	          cluster, or in Redis (redis-server installed when missing)
//	memory    RSS and live heap per key, end to end
//	exact     admitted count under 64 concurrent connections, limit 1000
//	boundary  the most each algorithm admits within one window to a client
//	          timing its bursts at the windows' edges, and what an honest
//	          client sending at the limit's rate gets
//	cpu       CPU time per request of the three Caddy binaries and three
//	          controls (a second plain Caddy, plain Caddy sending the same
//	          headers, edgelimit with headers off), each loaded at once
//	          with plain Caddy on one core, from the servers' schedstat
//	          over the requests they served (-cpu-slices, -cpu-slice)
//
// The stages under wrk need it, stores needs redis-server: it installs
// Debian's packages when they are missing.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// results is everything one run measured; each stage fills its part.
type results struct {
	Env   environment
	Micro benchResults
	// MicroBusy is BenchmarkHotKey with a busy process beside it
	// (microHotBusy).
	MicroBusy benchResults `json:",omitempty"`
	Handler   benchResults
	Accuracy  []accuracyRow
	E2E       []e2eRow
	Plain     map[string][]wrkResult
	Stores    []storeRow
	Memory    []memoryRow
	Exact     []exactRow
	Boundary  []boundaryRow
	CPU       []cpuRow
	Took      map[string]time.Duration
	// Ran is when each stage last ran (UTC): stages rerun with -only
	// are newer than the rest.
	Ran map[string]string `json:",omitempty"`
}

var stages = []string{"micro", "accuracy", "e2e", "stores", "memory", "exact", "boundary", "cpu"}

func main() {
	if len(os.Args) == 2 && os.Args[1] == busyLoopArg {
		busyLoop() // the micro stage's busy process (busyBeside)
		return
	}
	only := flag.String("only", "", "comma-separated stages to run ("+strings.Join(stages, ",")+"); the rest come from results/")
	quick := flag.Bool("quick", false, "one short run of everything: checks the harness, figures not fit to publish")
	out := flag.String("out", "../../BENCHMARKS.md", "the file whose generated section is rewritten")
	cpuN := flag.Int("cpu-slices", cpuSlices, "cpu stage: slices each server of a row gets")
	cpuD := flag.Duration("cpu-slice", cpuSlice, "cpu stage: the length of a slice (whole seconds: wrk's -d)")
	flag.Parse()
	if *cpuN < 1 || *cpuD < time.Second || *cpuD%time.Second != 0 {
		log.Fatalf("-cpu-slices %d -cpu-slice %v: at least one slice, of whole seconds", *cpuN, *cpuD)
	}
	log.SetFlags(log.Ltime)

	run := map[string]bool{}
	for _, s := range stages {
		run[s] = *only == ""
	}
	for _, s := range strings.Split(*only, ",") {
		if s == "" {
			continue
		}
		if !slices.Contains(stages, s) {
			log.Fatalf("unknown stage %q (stages: %s)", s, strings.Join(stages, ", "))
		}
		run[s] = true
	}

	if run["e2e"] || run["stores"] || run["memory"] || run["cpu"] {
		if err := ensureWrk(); err != nil {
			log.Fatal(err)
		}
	}
	resultsDir, _ := filepath.Abs("results")
	binDir := filepath.Join(resultsDir, "bin")
	work := filepath.Join(resultsDir, "work")
	for _, d := range []string{binDir, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	if err := writeScripts(work); err != nil {
		log.Fatal(err)
	}

	var res results
	saved := filepath.Join(resultsDir, "results.json")
	if data, err := os.ReadFile(saved); err == nil && *only != "" {
		if err := json.Unmarshal(data, &res); err != nil {
			log.Fatalf("%s: %v", saved, err)
		}
	}
	if res.Took == nil {
		res.Took = map[string]time.Duration{}
	}
	if res.Ran == nil {
		res.Ran = map[string]string{}
	}
	began := time.Now().UTC().Format("2006-01-02 15:04 UTC")
	for _, s := range stages {
		if run[s] {
			res.Ran[s] = began
		}
	}
	date := res.Env.Date // the whole command's last run, kept by -only
	res.Env = readEnvironment()
	if *only != "" && date != "" {
		res.Env.Date = date
	}
	res.Env.Quick = *quick

	e2e := e2eConfig{Rounds: 3, Duration: 3 * time.Second, Warm: time.Second}
	count, rounds, benchtime := microCount, microRounds, microBenchtime
	if *quick {
		e2e = e2eConfig{Rounds: 1, Duration: time.Second, Warm: time.Second}
		count, rounds, benchtime = "1", 1, "50ms"
	}

	switch {
	case run["e2e"] || run["stores"] || run["memory"] || run["exact"] || run["cpu"]:
		stage(res.Took, "build", func() error { return build(binDir, plain, edgelimit, ratelimit) })
	case run["boundary"]:
		stage(res.Took, "build", func() error { return build(binDir, edgelimit) })
	}
	// runStage runs the stage name if it is to run.
	runStage := func(name string, f func() error) {
		if run[name] {
			stage(res.Took, name, f)
		}
	}
	runStage("micro", func() (err error) {
		res.Micro, err = microLimiters(benchtime).runRounds(rounds)
		if err != nil {
			return err
		}
		if res.MicroBusy, err = microHotBusy(benchtime).runRounds(rounds); err != nil {
			return err
		}
		bytes, err := microBytes().run()
		if err != nil {
			return err
		}
		maps.Copy(res.Micro, bytes)
		res.Handler, err = microHandler(count, benchtime).run()
		return err
	})
	runStage("accuracy", func() (err error) {
		res.Accuracy, err = runAccuracy(*quick)
		return err
	})
	runStage("e2e", func() (err error) {
		res.E2E, res.Plain, err = runE2E(binDir, work, e2e)
		return err
	})
	runStage("stores", func() (err error) {
		res.Stores, err = runStores(binDir, work, e2e)
		return err
	})
	runStage("memory", func() (err error) {
		res.Memory, err = runMemory(binDir, work)
		return err
	})
	runStage("exact", func() (err error) {
		res.Exact, err = runExact(binDir, work)
		return err
	})
	runStage("boundary", func() (err error) {
		res.Boundary, err = runBoundary(binDir, work)
		return err
	})
	runStage("cpu", func() (err error) {
		res.CPU, err = runCPU(binDir, work, *quick, *cpuN, *cpuD)
		return err
	})

	data, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(saved, data, 0o644); err != nil {
		log.Fatal(err)
	}
	var ran, missing []string
	for _, s := range stages {
		if run[s] {
			ran = append(ran, s)
		}
		if _, ok := res.Ran[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		// No results for some stages: rewrite only what ran.
		log.Printf("%s has no results of %s: rewriting only the sections of %s in %s", saved, strings.Join(missing, ", "), strings.Join(ran, ", "), *out)
		if err := spliceReport(*out, &res, ran); err != nil {
			log.Fatal(err)
		}
	} else if err := writeReport(*out, &res); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s (results in %s)", *out, saved)
}

// stage runs f, timing it into took, and stops the program on an error.
func stage(took map[string]time.Duration, name string, f func() error) {
	log.Printf("stage %s", name)
	begin := time.Now()
	if err := f(); err != nil {
		log.Fatalf("stage %s: %v", name, err)
	}
	took[name] = time.Since(begin).Round(time.Second)
	log.Printf("stage %s took %v", name, took[name])
}

// ensureWrk installs Debian's wrk when it is not on PATH.
func ensureWrk() error {
	if _, err := exec.LookPath("wrk"); err == nil {
		return nil
	}
	return aptInstall("wrk")
}

// aptInstall installs Debian packages (through sudo -n when not root).
func aptInstall(pkgs ...string) error {
	log.Printf("installing %s (Debian packages)", strings.Join(pkgs, " "))
	for _, args := range [][]string{{"apt-get", "update"}, append([]string{"apt-get", "install", "-y"}, pkgs...)} {
		if os.Geteuid() != 0 {
			args = append([]string{"sudo", "-n"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("installing %s: %s: %w", strings.Join(pkgs, " "), strings.Join(args, " "), err)
		}
	}
	return nil
}
