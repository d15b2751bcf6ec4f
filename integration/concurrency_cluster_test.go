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

// concurrencyClusterConfig: max_concurrent 6 of one key across the
// cluster's nodes.
const concurrencyClusterConfig = `{
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
http://127.0.0.1:{{.HTTP}} {
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
	ports := freePorts(t, 3)
	var join []string
	for _, p := range ports {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", p))
	}
	nodes := make([]*caddyProc, 3)
	for i := range nodes {
		nodes[i] = startCaddy(t, cfg, fmt.Sprintf("EDGELIMIT_NODE=edge-%d", i+1),
			"EDGELIMIT_GOSSIP_BIND="+join[i], "EDGELIMIT_GOSSIP_JOIN="+strings.Join(join, " "),
			"EDGELIMIT_GOSSIP_KEY="+clusterKey)
	}
	for _, p := range nodes {
		p.waitMembers(t, 3)
	}
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
