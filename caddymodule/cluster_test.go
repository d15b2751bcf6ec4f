package caddymodule

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/internal/clusternode"
)

// clusterApp is an app whose cluster node is a Sharing alone (no
// membership), in a cluster of size nodes.
func clusterApp(size int) (*App, *gossip.Sharing) {
	app := testApp()
	app.Cluster = &appconfig.ClusterConfig{}
	sh := gossip.NewSharing(gossip.SharingConfig{Self: "self"})
	sh.SetClusterSize(size)
	app.cluster = new(clusterUse)
	app.cluster.node.Store(&clusternode.Node{Sharing: sh})
	return app, sh
}

// A rule with scope cluster takes this node's share of each key's limit:
// alone, the whole; in a cluster of 10, a key nobody reported hot gets the
// cold share, 1.1/10. Headers show the global limit, and what remains of
// it here. A rule with scope node keeps its whole limit.
func TestClusterScope(t *testing.T) {
	shared := hourly("shared", 100)
	perNode := hourly("per-node", 100)

	for _, c := range []struct {
		size, shared, perNode int
	}{{1, 100, 100}, {10, 11, 100}} {
		app, sh := clusterApp(c.size)
		h := chain(sharedHandler(t, app, shared), testHandler(t, app, perNode))
		counts := map[string]int{}
		for range 120 {
			w := httptest.NewRecorder()
			err := h.ServeHTTP(w, newRequest("203.0.113.9"))
			if err == nil {
				counts["allowed"]++
			}
			if counts["allowed"] == 1 && err == nil {
				if got := fmt.Sprint(w.Header().Values("RateLimit-Policy")); got != `["shared";q=100;w=3600 "per-node";q=100;w=3600]` {
					t.Errorf("size %d: RateLimit-Policy %q", c.size, got)
				}
			}
		}
		if counts["allowed"] != c.shared {
			t.Errorf("cluster of %d: %d allowed, want %d", c.size, counts["allowed"], c.shared)
		}
		if c.size > 1 {
			// the key came near its share: it is followed, to be reported
			if shares := sh.Shares(0); len(shares) != 1 || shares[0].Key != "203.0.113.9" {
				t.Errorf("cluster of %d: tracked %+v, want the client's key", c.size, shares)
			}
		}
	}
	perNodeOnly := chain(testHandler(t, mustClusterApp(10), perNode))
	if got := count200(t, perNodeOnly, 120); got != 100 {
		t.Errorf("scope node in a cluster of 10: %d allowed, want 100", got)
	}
}

func mustClusterApp(size int) *App {
	app, _ := clusterApp(size)
	return app
}

// count200 sends n requests from one client and counts those allowed.
func count200(t *testing.T, h caddyhttp.Handler, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		if status(t, h, newRequest("203.0.113.10")) == 200 {
			allowed++
		}
	}
	return allowed
}

func TestClusterLongKey(t *testing.T) {
	rule := ruleconfig.Rule{Name: "long", Limits: []ruleconfig.Limit{{Count: 100, Window: caddy.Duration(time.Hour)}}, By: []string{"header X-Key"}}
	app, sh := clusterApp(10)
	h := chain(sharedHandler(t, app, rule))
	long := strings.Repeat("k", 1<<20)
	for range 8 { // 11 allowed here (1.1/10 of 100): past half, the key is followed
		r := newRequest("203.0.113.11")
		r.Header.Set("X-Key", long)
		if got := status(t, h, r); got != 200 {
			t.Fatalf("status %d", got)
		}
	}
	shares := sh.Shares(0)
	if len(shares) != 1 || shares[0].Key != hashedKey(long) {
		t.Fatalf("tracked %d keys, want the long key as its SHA-256", len(shares))
	}
}
