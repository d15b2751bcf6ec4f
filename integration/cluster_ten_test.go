package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// tenNodesLimit is L of TestClusterTenNodes, a second.
const tenNodesLimit = 100

// tenNodesCaddyfile: L = 100 a second per key, shared by the cluster:
// token_bucket on /tb (its capacity the default, L) and /tb10 (burst 10),
// sliding_window on /sw.
const tenNodesCaddyfile = nodeGlobal + `http://127.0.0.1:{{.HTTP}} {
	rate_limit /tb {
		name tb
		limit 100 1s
		algorithm token_bucket
		by header X-Api-Key
	}
	rate_limit /tb10 {
		name tb10
		limit 100 1s
		algorithm token_bucket
		burst 10
		by header X-Api-Key
	}
	rate_limit /sw {
		name sw
		limit 100 1s
		by header X-Api-Key
	}
	respond "ok"
}
`

// TestClusterTenNodes (issue 36): ten real nodes share L = 100 a second;
// a client sends 2×L evenly paced, a fresh key a phase, each request to a
// node drawn at random, evenly or skewed (half to one node), each phase
// once. The median second from the key's third is within 0.95–1.05×L
// with token_bucket (a share's rate is no longer rounded down to whole
// units: it was 0.94–0.96, whole units losing up to one a node a second;
// three runs here, load 10–17: 0.96–1.01), 0.90–1.05 with sliding_window,
// whose count is whole units (0.91–0.99 in the three runs; docs/cluster.md,
// "What the figures mean"). A cold token_bucket key's first second is at
// most 1.1×L with burst 10, and at least 0.8 (0.84–1.00 in the three runs,
// 0.88–1.09 simulated: the 0.9 is not held, a node asked 1 to 10
// requests an interval takes a few intervals to be followed); with the
// default capacity (L) it is not bounded by 1.1: a token bucket admits up
// to its capacity plus L in a second, one node alone 1.99×L (gossip/sim),
// the ten 1.09–1.32 here (asserted 0.9–2: the 0.9 holds).
// Skipped under -short: ten processes.
func TestClusterTenNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("ten Caddy processes")
	}
	needCaddy(t)
	nodes := startNodes(t, 10, caddyOf(t, tenNodesCaddyfile))
	rng := rand.New(rand.NewPCG(36, 1))
	var mu sync.Mutex
	skewed := []float64{9, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, path := range []string{"/tb", "/tb10", "/sw"} {
		for i, split := range [][]float64{nil, skewed} {
			key := fmt.Sprintf("ten-%s-%d", path[1:], i)
			admitted, _ := accuracyLoad(t, path, key, 6, 2*tenNodesLimit, func(time.Duration) *caddyProc {
				mu.Lock()
				defer mu.Unlock()
				return nodes[pickWeighted(rng, split, len(nodes))]
			})
			r := make([]float64, len(admitted))
			for s, a := range admitted {
				r[s] = float64(a) / tenNodesLimit
			}
			steady := slices.Clone(r[2:])
			slices.Sort(steady)
			med := steady[len(steady)/2]
			t.Logf("%s split %v: admitted/L per second %.2f, median from 2s %.2f", path, split, r, med)
			lo := 0.95
			if path == "/sw" {
				lo = 0.90
			}
			if med < lo || med > 1.05 {
				t.Errorf("%s split %v: median %.2f×L, want %.2f–1.05", path, split, med, lo)
			}
			if path == "/tb10" && (r[0] < 0.8 || r[0] > 1.1) {
				t.Errorf("%s split %v: a cold key's first second %.2f×L, want 0.8–1.1", path, split, r[0])
			}
			// the bound, with the default capacity: at least 0.9×L,
			// and never past what one bucket allows (capacity L plus L)
			if path == "/tb" && (r[0] < 0.9 || r[0] > 2) {
				t.Errorf("%s split %v: a cold key's first second %.2f×L, want 0.9–2 (capacity plus L)", path, split, r[0])
			}
		}
	}
}
