package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A goBench is one `go test -bench` invocation.
type goBench struct {
	Dir  string   // where to run it
	Args []string // after `go test`
	// Busy runs a busy process beside it (busyBeside): a hot key's
	// decisions when the machine has other work.
	Busy bool
}

// command is how a reader reruns b, from the repository's root.
func (b goBench) command(fromRoot string) string {
	var args []string
	for _, a := range b.Args {
		if strings.ContainsAny(a, "^$|*?() ") {
			a = "'" + a + "'"
		}
		args = append(args, a)
	}
	cmd := "go test " + strings.Join(args, " ")
	if fromRoot != "" {
		cmd = "(cd " + fromRoot + " && " + cmd + ")"
	}
	return cmd
}

// benchResults maps a benchmark's name (without the -GOMAXPROCS suffix)
// to its unit's values, one per run: "BenchmarkHotKey/x-time-rate" →
// "ns/op" → [93.1 90.2 …].
type benchResults map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// run runs b, echoing its output to stderr, and collects every figure.
func (b goBench) run() (benchResults, error) {
	if b.Busy {
		stop, err := busyBeside()
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	cmd := exec.Command("go", append([]string{"test"}, b.Args...)...)
	cmd.Dir = b.Dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := benchResults{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(os.Stderr, line)
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			if res[m[1]] == nil {
				res[m[1]] = map[string][]float64{}
			}
			res[m[1]][fields[i+1]] = append(res[m[1]][fields[i+1]], v)
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go test %s: %w", strings.Join(b.Args, " "), err)
	}
	return res, nil
}

// median of vs (0 if none), as benchstat reports the center.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is the smallest and largest of vs.
func spread(vs []float64) (lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	return slices.Min(vs), slices.Max(vs)
}

// How often and how long each microbenchmark runs: medians of five (the
// limiters' in five rounds, the handler's by -count).
const (
	microCount     = "5"
	microRounds    = 5
	microBenchtime = "300ms"
)

// microLimiters is the limiter microbenchmarks of package limiters, but
// for BenchmarkBytesPerKey (microBytes): one run of each, to be run in
// rounds (runRounds).
func microLimiters(benchtime string) goBench {
	return goBench{Dir: ".", Args: []string{"-run", "^$", "-bench", "HotKey|Uniform1M|Zipf1M", "-benchmem", "-count", "1", "-benchtime", benchtime, "./limiters"}}
}

// microHotBusy is the hot-key microbenchmark with a busy process beside
// it: on two cores, one P of the two deciding on the key is taken off its
// core now and then, as on a machine with other work.
func microHotBusy(benchtime string) goBench {
	return goBench{Dir: ".", Args: []string{"-run", "^$", "-bench", "^BenchmarkHotKey$", "-benchmem", "-count", "1", "-benchtime", benchtime, "./limiters"}, Busy: true}
}

// busyLoopArg as the command's first argument makes it the busy process
// of busyBeside: it spins until it is killed, or busyLoopMax has passed.
const (
	busyLoopArg = "-busy-loop"
	busyLoopMax = 10 * time.Minute
)

// busyLoop spins on one core for busyLoopMax at most.
func busyLoop() {
	deadline := time.Now().Add(busyLoopMax)
	for x := uint64(1); time.Now().Before(deadline); {
		for range 1 << 20 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
}

// busyBeside starts this command as a busy process (busyLoopArg), and
// returns what stops it.
func busyBeside() (stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, busyLoopArg)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		cmd.Process.Kill()
		cmd.Wait()
	}, nil
}

// runRounds runs b rounds times and collects every figure. A benchmark's
// -count runs one after the other, so a contender's runs would share
// whatever the host did meanwhile (two Ps on one hot key move by 2–3×
// from minute to minute on this repository's VMs); a round runs every
// contender once, so each contender's runs spread over the same minutes.
func (b goBench) runRounds(rounds int) (benchResults, error) {
	all := benchResults{}
	for range rounds {
		res, err := b.run()
		if err != nil {
			return nil, err
		}
		for name, units := range res {
			if all[name] == nil {
				all[name] = map[string][]float64{}
			}
			for unit, vs := range units {
				all[name][unit] = append(all[name][unit], vs...)
			}
		}
	}
	return all, nil
}

// microBytes measures each store's heap per key: deterministic, so once.
func microBytes() goBench {
	return goBench{Dir: ".", Args: []string{"-run", "^$", "-bench", "BytesPerKey", "-count", "1", "./limiters"}}
}

// microHandler is the plugin's handler benchmark, in its own module: the
// cost of a request through Caddy's handler chain with and without
// rate_limit.
func microHandler(count, benchtime string) goBench {
	return goBench{Dir: "../..", Args: []string{"-run", "^$", "-bench", "ServeHTTP", "-benchmem", "-count", count, "-benchtime", benchtime, "./caddymodule"}}
}
