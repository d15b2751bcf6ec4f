package integration

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisPipelineConfig is redisExactConfig with every request a script
// (over_limit_cache off) and pipelining as PIPELINE says (on or off),
// its keys under a prefix of their own; /warm is a rule of the same
// limit under another name: the same script, its own key.
const redisPipelineConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			timeout 2s
			over_limit_cache off
			pipeline PIPELINE
			key_prefix PIPELINE:
		}
	}
}

(rule) {
	rate_limit {
		name {args[0]}
		limit 1000 1h
		by static everyone
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}

:{{.HTTP}} {
	handle /warm {
		import rule warm
	}
	handle {
		import rule exact
	}
}
`

// hammerCaddy sends requests in all from workers connections at once,
// spread over nodes, and returns the count of each status.
func hammerCaddy(t *testing.T, nodes []*caddyProc, requests, workers int, path string) map[int]int {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	tally := make(map[int]int)
	var failed error
	var wg sync.WaitGroup
	for w := range workers {
		p := nodes[w%len(nodes)]
		wg.Go(func() {
			for next.Add(1) <= int64(requests) {
				code, _, err := p.rawGet(context.Background(), path)
				mu.Lock()
				if err != nil {
					failed = err
				}
				tally[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("a request failed: %v", failed)
	}
	return tally
}

// TestRedisPipelined: one Caddy with pipeline on, one with pipeline off,
// on one Redis (their keys apart), each sent 3000 requests from 64
// connections at once, limit 1000 an hour: exactly 1000 pass on each.
// Every request is one script (over_limit_cache off; a request to /warm
// first has Redis load the script, so that none is answered NOSCRIPT and
// sent again): pipelined, they went to Redis in fewer round trips than
// requests, and without, in one round trip each
// (caddy_rate_limit_store_round_trips_total and scripts_total, over the
// 3000).
func TestRedisPipelined(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	const requests, workers = 3000, 64
	for _, pipeline := range []string{"on", "off"} {
		p := startCaddy(t, strings.ReplaceAll(redisPipelineConfig, "PIPELINE", pipeline), "EDGELIMIT_REDIS="+srv.Addr)
		if code, _, err := p.rawGet(context.Background(), "/warm"); err != nil || code != 200 {
			t.Fatalf("pipeline %s: /warm answered %d, %v", pipeline, code, err)
		}
		counts := func() (trips, scripts float64) {
			_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
			return metricFloat(t, metrics, "caddy_rate_limit_store_round_trips_total"), metricFloat(t, metrics, "caddy_rate_limit_store_scripts_total")
		}
		trips0, scripts0 := counts()
		tally := hammerCaddy(t, []*caddyProc{p}, requests, workers, "/x")
		if tally[200] != 1000 || tally[429] != requests-1000 || len(tally) != 2 {
			t.Errorf("pipeline %s: statuses %v, want exactly 1000×200 and %d×429", pipeline, tally, requests-1000)
		}
		trips, scripts := counts()
		trips, scripts = trips-trips0, scripts-scripts0
		t.Logf("pipeline %s: %d requests, %v scripts in %v round trips", pipeline, requests, scripts, trips)
		switch {
		case scripts != requests:
			t.Errorf("pipeline %s: %v scripts, want %d (one a request)", pipeline, scripts, requests)
		case pipeline == "on" && (trips < 1 || trips >= scripts):
			t.Errorf("pipeline on: %v round trips for %v scripts, want fewer", trips, scripts)
		case pipeline == "off" && trips != scripts:
			t.Errorf("pipeline off: %v round trips for %v scripts, want one each", trips, scripts)
		}
	}
}

// waitRedisDecides polls path until it is answered 200, for 10 s at most.
func waitRedisDecides(t *testing.T, p *caddyProc, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _, _ := p.rawGet(context.Background(), path); code == 200 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: still %d after 10 s", path, code)
		}
	}
}

// redisStoppedConfig is one rule that Redis decides with the default
// timeout (50ms), refusing (503) what it cannot decide.
const redisStoppedConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			probe_interval 200ms
		}
	}
}

:{{.HTTP}} {
	rate_limit {
		name stopped
		limit 1000000000 1h
		by static everyone
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestRedisStoppedMidBatch: 32 connections keep one key busy (pipelines
// in the air, calls queued behind them), and Redis is stopped (SIGSTOP)
// after 300 requests: every request is still answered, 200 or 503, the
// slowest within 500 ms (the timeout is 50 ms), none hangs (each
// connection stops at its first 503 after the stop). Continued,
// Redis decides again. (A 503 before the stop is a call past its 50 ms
// on a loaded machine: counted, not failed.)
func TestRedisStoppedMidBatch(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	t.Cleanup(srv.Resume)
	p := startCaddy(t, redisStoppedConfig, "EDGELIMIT_REDIS="+srv.Addr)
	waitRedisDecides(t, p, "/x") // connected, the script loaded: the load starts from a Redis that answers
	var done atomic.Int64
	var paused atomic.Bool
	var mu sync.Mutex
	tally := make(map[int]int)
	var slowest time.Duration
	var failed error
	var wg sync.WaitGroup
	var stopped sync.Once
	for range 32 {
		wg.Go(func() {
			for {
				t0 := time.Now()
				code, _, err := p.rawGet(context.Background(), "/x")
				took := time.Since(t0)
				mu.Lock()
				tally[code]++
				slowest = max(slowest, took)
				if err != nil {
					failed = err
				}
				mu.Unlock()
				if done.Add(1) == 300 {
					stopped.Do(func() { srv.Pause(); paused.Store(true) })
				}
				if (code == 503 && paused.Load()) || err != nil {
					return // its request in flight at the stop has been answered: done
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatalf("requests still running 30 s in: one hangs (%d done)", done.Load())
	}
	t.Logf("%d requests, Redis stopped after 300: %v, slowest %s", done.Load(), tally, slowest)
	if failed != nil {
		t.Fatalf("a request failed: %v", failed)
	}
	if tally[200] < 1 || tally[503] < 32 || len(tally) != 2 {
		t.Errorf("statuses %v, want 200s (Redis deciding), then a 503 on each of 32 connections, nothing else", tally)
	}
	if slowest >= 500*time.Millisecond {
		t.Errorf("slowest request took %s, want < 500ms (timeout 50ms)", slowest)
	}
	srv.Resume()
	waitRedisDecides(t, p, "/x")
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if n := metricFloat(t, metrics, `caddy_rate_limit_store_errors_total{reason="timeout"}`); n < 1 {
		t.Errorf("no timeout counted (%v)", n)
	}
}
