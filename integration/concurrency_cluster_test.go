package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clusterGlobals is the global options of a test's cluster node, its
// addresses and key from startNodes' environment.
const clusterGlobals = `{
	{{.Global}}
	rate_limit {
		cluster {
			bind {$EDGELIMIT_GOSSIP_BIND}
			join {$EDGELIMIT_GOSSIP_JOIN}
			secret_key {$EDGELIMIT_GOSSIP_KEY}
			node_name {$EDGELIMIT_NODE}
			sync_interval 100ms
		}
	}
}
`

// concurrencyClusterConfig: max_concurrent 6 of one key across the
// cluster's nodes.
const concurrencyClusterConfig = clusterGlobals + `http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name conc
		max_concurrent 6
		by header X-User
	}
	reverse_proxy BACKEND
}
`

// TestConcurrencyCluster: three nodes share one key's max_concurrent 6.
// 24 clients, each sending to the nodes in turn, keep the key busy for
// 3 s against an upstream that holds each request 20 ms: the most the
// upstream holds at once, fleet-wide, is at most 6; every node ends with
// none in flight.
func TestConcurrencyCluster(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond) // load shape: a slow upstream
		inFlight.Add(-1)                  // before the answer leaves
	}))
	t.Cleanup(backend.Close)
	cfg := strings.ReplaceAll(concurrencyClusterConfig, "BACKEND", strings.TrimPrefix(backend.URL, "http://"))
	nodes := startNodes(t, 3, caddyOf(t, cfg))
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(stop); i++ {
				code, _, err := nodes[i%3].rawGet(context.Background(), "/x", "X-User", "fleet")
				switch {
				case err != nil:
					t.Error(err)
					return
				case code == 200:
					served.Add(1)
				case code == 429:
					refused.Add(1)
				default:
					t.Errorf("status %d", code)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("served %d, refused %d, most in flight at once fleet-wide %d", served.Load(), refused.Load(), peak.Load())
	// The contract: at most 6 at once over the fleet. (It held 6 of 6
	// in 5 runs on 2 cores; before the join grace counted the whole join
	// list, a node that had met one seed took a cold cap of 6/2 while
	// the third still held 6/3: 7 or 8 at once.)
	if p := peak.Load(); p > 6 {
		t.Errorf("the upstream held %d of the key at once, over max_concurrent 6", p)
	}
	if served.Load() == 0 {
		t.Error("nothing served")
	}
	for _, p := range nodes {
		waitInFlight(t, p, "conc", "0")
	}
}

// TestConcurrencyClusterKill: three nodes share max_concurrent 6 of one
// key; node 1 holds its requests when it is killed (kill -9: no leave).
// The two others, which counted node 1's requests in flight, get its
// places back once it is declared silent: the time until they hold 6 at
// once between them is measured, and bounded.
func TestConcurrencyClusterKill(t *testing.T) {
	t.Parallel()
	var inFlight [3]atomic.Int64 // at the upstream, by node
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var node int
		fmt.Sscanf(r.Header.Get("X-Node"), "edge-%d", &node)
		if node < 1 || node > 3 {
			t.Errorf("X-Node %q", r.Header.Get("X-Node"))
			return
		}
		inFlight[node-1].Add(1)
		defer inFlight[node-1].Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		backend.Close()
	})
	cfg := strings.ReplaceAll(concurrencyClusterConfig, "reverse_proxy BACKEND", "reverse_proxy BACKEND {\n\t\theader_up X-Node {$EDGELIMIT_NODE}\n\t}")
	cfg = strings.ReplaceAll(cfg, "BACKEND", strings.TrimPrefix(backend.URL, "http://"))
	nodes := startNodes(t, 3, caddyOf(t, cfg))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// send keeps asking node p for a place until it holds one (the
	// request then waits at the upstream until the test ends).
	send := func(p *caddyProc) {
		for ctx.Err() == nil {
			code, _, _ := p.rawGet(ctx, "/x", "X-User", "fleet")
			if code != 429 {
				return // held until the end, then 200 (or the node died)
			}
			time.Sleep(10 * time.Millisecond) // a client's retry pace
		}
	}
	for range 12 {
		go send(nodes[0])
	}
	poll(t, "node 1 holds places", 10*time.Second, func() bool { return inFlight[0].Load() >= 1 })
	time.Sleep(time.Second) // node 1's demand is reported: it holds the key's share
	held := inFlight[0].Load()
	killed := time.Now()
	nodes[0].cmd.Process.Kill() // kill -9: its requests end at the upstream, but the others do not know
	for range 12 {
		go send(nodes[1])
		go send(nodes[2])
	}
	survivors := func() int64 { return inFlight[1].Load() + inFlight[2].Load() }
	poll(t, "the survivors hold all 6 places", 30*time.Second, func() bool { return survivors() >= 6 })
	took := time.Since(killed)
	t.Logf("node 1 held %d; after kill -9, the two others held 6 at once %v later", held, took.Round(10*time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the killed node's places came back after %v, want within 5s (measured about 1.1s: memberlist's suspicion, then the share's TTL)", took)
	}
	if n := survivors(); n > 6 {
		t.Errorf("%d in flight at the upstream, over max_concurrent 6", n)
	}
}

// poll checks cond every 10 ms until it holds, failing t after within.
func poll(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}
