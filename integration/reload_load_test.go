package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// reloadLoadCaddyfile is a config whose one rule allows LIMIT requests an
// hour per client (an hour: no window ends within a run).
const reloadLoadCaddyfile = plainGlobals + `
:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit LIMIT 1h
	}
	respond "ok"
}
`

// goroutines is the number of goroutines of the Caddy process.
func (p *caddyProc) goroutines(t *testing.T) int {
	t.Helper()
	code, body := p.admin(t, http.MethodGet, "/debug/pprof/goroutine?debug=1", "")
	first, _, _ := strings.Cut(body, "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "goroutine profile: total "))
	if code != 200 || err != nil {
		t.Fatalf("goroutine profile: %d %q", code, first)
	}
	return n
}

// TestReloadUnderLoad: reloads alternating two limits while one client
// asks as fast as eight connections allow: no error but 429s (and the
// connection resets Caddy itself makes when reloading), and the counters
// carry through every reload (the client gets the larger limit once in the
// hour, not a fresh limit at each reload); the process ends with the
// goroutines it had, and its memory has not grown. Ten reloads 200 ms
// apart by default; EDGELIMIT_RELOADS and EDGELIMIT_RELOAD_EVERY_MS make
// the longer run of BENCHMARKS.md (20 reloads 3 s apart).
func TestReloadUnderLoad(t *testing.T) {
	config := func(limit int) string {
		return strings.ReplaceAll(reloadLoadCaddyfile, "LIMIT", fmt.Sprint(limit))
	}
	reloads := envInt(t, "EDGELIMIT_RELOADS", 10)
	every := time.Duration(envInt(t, "EDGELIMIT_RELOAD_EVERY_MS", 200)) * time.Millisecond
	p := startCaddy(t, config(100))
	p.reload(t, config(120)) // the reload machinery warmed up once
	p.client.CloseIdleConnections()
	before, rssBefore := p.goroutines(t), p.rss(t)

	var allowed, denied, failed, resets atomic.Int64
	var firstErr atomic.Value
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	took := make([][]time.Duration, 8) // each connection's request times
	for c := range took {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				code, _, err := p.rawGet(ctx, "/api/x")
				took[c] = append(took[c], time.Since(start))
				switch {
				case ctx.Err() != nil:
				case err != nil && strings.Contains(err.Error(), "connection reset by peer"):
					// Caddy's: an old server resets a kept-alive connection
					// that was answered with an error (a 429 too) as it
					// stops; plain Caddy with `error 429` does the same
					// (measured: 6 resets in 6 runs of this load)
					resets.Add(1)
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case code == http.StatusOK:
					allowed.Add(1)
				case code == http.StatusTooManyRequests:
					denied.Add(1)
				default:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d", code))
				}
			}
		}()
	}
	began := time.Now()
	for i := range reloads {
		time.Sleep(every) // load between reloads, not a wait for a result
		p.load(t, "text/caddyfile", render(t, config(100+20*(i%2)), p.data))
	}
	stop()
	wg.Wait()
	p50, p99, most := percentiles(slices.Concat(took...))
	t.Logf("%d reloads in %v: %d allowed, %d denied, %d failed, %d connections reset; latency p50 %v, p99 %v, max %v",
		reloads, time.Since(began).Round(time.Millisecond), allowed.Load(), denied.Load(), failed.Load(), resets.Load(), p50, p99, most)
	if failed.Load() != 0 {
		t.Errorf("%d requests failed (first: %v)", failed.Load(), firstErr.Load())
	}
	// every reload kept the counters: 100 under the first limit, up to 20
	// more under the larger one, in the minute
	if a := allowed.Load(); a < 100 || a > 120 {
		t.Errorf("%d allowed across the reloads, want 100 to 120", a)
	}
	if denied.Load() < 1000 {
		t.Errorf("only %d denied: the load did not run", denied.Load())
	}
	p.client.CloseIdleConnections()
	after := p.goroutines(t)
	for deadline := time.Now().Add(5 * time.Second); after > before+5 && time.Now().Before(deadline); after = p.goroutines(t) {
		time.Sleep(50 * time.Millisecond) // connections closing
	}
	rssAfter := p.rss(t)
	t.Logf("goroutines: %d before the reloads, %d after; RSS %.1f MB before, %.1f MB after", before, after, float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20))
	if after > before+5 {
		t.Errorf("goroutines: %d before %d reloads, %d after", before, reloads, after)
	}
	if rssAfter-rssBefore > 64<<20 {
		t.Errorf("RSS grew by %d MB over %d reloads, want under 64", (rssAfter-rssBefore)>>20, reloads)
	}
}

// percentiles are the median, the 99th percentile and the largest of ds.
func percentiles(ds []time.Duration) (p50, p99, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
}
