package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// floodCaddyfile limits each X-Key to 10 requests a day (a day, so that no
// window edge falls within a run), holding at most MAX_KEYS keys.
const floodCaddyfile = plainGlobals + `
:{{.HTTP}} {
	rate_limit /api/* {
		name flood
		limit 10 1d
		by header X-Key
		max_keys MAX_KEYS
	}
	respond "ok"
}
`

// rss is the resident memory of the Caddy process, in bytes.
func (p *caddyProc) rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestKeyFlood: a flood of never-repeating keys, five times max_keys, at
// full speed: the rule holds at most max_keys keys, counts the evictions,
// answers nothing but 200 and 429, stays within 64 MB of its idle memory,
// and a client that keeps asking keeps its counter (the least recently
// used keys go, and it is never one of them). EDGELIMIT_FLOOD_KEYS and
// EDGELIMIT_FLOOD_MAX_KEYS make it a longer run (BENCHMARKS.md).
func TestKeyFlood(t *testing.T) {
	keys, maxKeys := envInt(t, "EDGELIMIT_FLOOD_KEYS", 100_000), envInt(t, "EDGELIMIT_FLOOD_MAX_KEYS", 20_000)
	p := startCaddy(t, strings.ReplaceAll(floodCaddyfile, "MAX_KEYS", fmt.Sprint(maxKeys)))
	wantStatuses(t, "warm-up", p.statuses(t, 1, "/api/x", "X-Key", "warm-up"), seq(1, 200, 0, 0))
	idle := p.rss(t)

	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	fl := startFlood(int64(keys), 16, func(i int64) {
		code, _, err := p.rawGet(context.Background(), "/api/x", "X-Key", fmt.Sprintf("flood-%d", i))
		if err != nil || code != http.StatusOK {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprint(code, err))
		}
	})
	// a real client, asking every 20 ms through the flood: 10 allowed in
	// the day, then 429s, its counter never reset
	legit := map[int]int{}
	for !fl.finished() {
		legit[p.status(t, "/api/x", "X-Key", "legit")]++
		time.Sleep(20 * time.Millisecond) // the client's pace
	}
	fl.wait()
	took := time.Since(start)
	grown := p.rss(t) - idle

	var r adminRule
	p.adminJSON(t, "/rate_limit/rules/flood", &r)
	t.Logf("%d keys in %v (%.0f/s); %d live, %d evicted; RSS %d MB idle, +%.1f MB; legit client: %v",
		keys, took.Round(time.Millisecond), float64(keys)/took.Seconds(), r.Keys, r.Evictions, idle>>20, float64(grown)/(1<<20), legit)
	if failed.Load() != 0 {
		t.Errorf("%d flood requests not answered 200 (first: %v)", failed.Load(), firstErr.Load())
	}
	if r.Keys > maxKeys || r.Evictions < uint64(keys+2-maxKeys) {
		t.Errorf("%d live keys, %d evicted; want at most %d live and at least %d evicted", r.Keys, r.Evictions, maxKeys, keys+2-maxKeys)
	}
	if legit[200] != 10 || len(legit) != 2 || legit[429] < 1 {
		t.Errorf("the real client got %v, want 10×200 then 429s", legit)
	}
	if grown > 64<<20 {
		t.Errorf("RSS grew by %d MB, want under 64", grown>>20)
	}
}

// envInt is the environment variable name as a whole number, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

// A flood sends requests from several goroutines until n are sent.
type flood struct {
	n    int64
	next atomic.Int64
	wg   sync.WaitGroup
}

// startFlood calls send(i) for i from 1 to n, on workers goroutines.
func startFlood(n int64, workers int, send func(i int64)) *flood {
	f := &flood{n: n}
	for range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for i := f.next.Add(1); i <= n; i = f.next.Add(1) {
				send(i)
			}
		}()
	}
	return f
}

// finished reports whether every request has been started.
func (f *flood) finished() bool { return f.next.Load() >= f.n }

// wait returns once every request has been answered.
func (f *flood) wait() { f.wg.Wait() }
