package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisClusterConfig is a node of a fleet sharing one Redis Cluster, given
// all three masters as seeds: /x is limited to 1000 an hour for every
// request together; /k to 50 an hour per X-Key. As in redisExactConfig,
// a slow answer shows as a 503, not as a local decision.
const redisClusterConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS_1} {env.EDGELIMIT_REDIS_2} {env.EDGELIMIT_REDIS_3}
			cluster on
			timeout 2s
		}
	}
}

:{{.HTTP}} {
	rate_limit /x {
		name exact
		limit 1000 1h
		by static everyone
		store redis
		on_store_error fail_closed
	}
	rate_limit /k {
		name keys
		limit 50 1h
		by header X-Key
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestRedisCluster: three Caddy processes on a Redis Cluster of three
// masters. 5000 requests from 64 concurrent connections spread over them:
// exactly 1000 pass. Then six keys, two on each master, 100 requests each,
// all at once: exactly 50 of each pass, and each key's state is on the
// master that serves its slot.
func TestRedisCluster(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	env := make([]string, 3)
	for i, a := range cl.Addrs() {
		env[i] = fmt.Sprintf("EDGELIMIT_REDIS_%d=%s", i+1, a)
	}
	var nodes []*caddyProc
	for range 3 {
		nodes = append(nodes, startCaddy(t, redisClusterConfig, env...))
	}

	start := time.Now()
	tally := fanOut(t, nodes, 5000, 64, func(int) (string, string, []string) { return "x", "/x", nil })
	t.Logf("5000 requests over %d nodes in %s: %v", len(nodes), time.Since(start).Round(time.Millisecond), tally["x"])
	if got := tally["x"]; got[200] != 1000 || got[429] != 4000 || len(got) != 2 {
		t.Errorf("/x: statuses %v, want exactly 1000×200 and 4000×429", got)
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	t.Cleanup(func() { cc.Close() })
	keys, masterOf := keysOnEveryMaster(t, cc, len(cl.Servers), 2)
	start = time.Now()
	tally = fanOut(t, nodes, 100*len(keys), 64, func(i int) (string, string, []string) {
		k := keys[i%len(keys)]
		return k, "/k", []string{"X-Key", k}
	})
	t.Logf("%d requests on %d keys (masters %v) in %s: %v", 100*len(keys), len(keys), masterOf, time.Since(start).Round(time.Millisecond), tally)
	ctx := context.Background()
	for _, k := range keys {
		if got := tally[k]; got[200] != 50 || got[429] != 50 || len(got) != 2 {
			t.Errorf("key %s (on %s): statuses %v, want exactly 50×200 and 50×429", k, masterOf[k], got)
		}
		// redisstore's layout: <key_prefix><rule>:{<key>}
		if n, err := masterClient(t, masterOf[k]).Exists(ctx, "edgelimit:keys:{"+k+"}").Result(); n != 1 || err != nil {
			t.Errorf("key %s: not on its master %s: exists %d, %v", k, masterOf[k], n, err)
		}
	}
	var view adminKey
	nodes[0].adminJSON(t, "/rate_limit/rules/keys/keys/"+keys[0], &view)
	if len(view.Limits) != 1 || view.Limits[0].Used != 50 || view.Limits[0].Remaining != 0 {
		t.Errorf("admin view of key %s in the cluster: %+v, want 50 used, 0 remaining", keys[0], view)
	}
}

// keysOnEveryMaster picks keys k0, k1, … until each of the cluster's
// masters serves the slots of perMaster of them; it returns them and the
// master of each.
func keysOnEveryMaster(t *testing.T, cc *redis.ClusterClient, masters, perMaster int) ([]string, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	masterOf := make(map[string]string)
	count := make(map[string]int)
	for i := 0; len(keys) < perMaster*masters; i++ {
		if i > 1000 {
			t.Fatalf("no %d keys on each of %d masters among 1000: %v", perMaster, masters, count)
		}
		k := fmt.Sprintf("k%d", i)
		m, err := cc.MasterForKey(ctx, "{"+k+"}")
		if err != nil {
			t.Fatal(err)
		}
		if addr := m.Options().Addr; count[addr] < perMaster {
			count[addr]++
			keys = append(keys, k)
			masterOf[k] = addr
		}
	}
	return keys, masterOf
}

// masterClient is a client to the cluster node at addr alone (no
// redirection), closed when t ends.
func masterClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// fanOut sends n requests from workers concurrent connections, worker w
// on nodes[w%len(nodes)]. Request i is req(i): the group it is tallied
// in, its path and its headers (name, value pairs). It returns the
// statuses of each group, and fails t if a request fails.
func fanOut(t *testing.T, nodes []*caddyProc, n, workers int, req func(i int) (group, path string, headers []string)) map[string]map[int]int {
	t.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	tally := make(map[string]map[int]int)
	var failed error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := nodes[w%len(nodes)]
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				group, path, headers := req(i)
				code, _, err := p.rawGet(context.Background(), path, headers...)
				mu.Lock()
				if err != nil {
					failed = err
				}
				if tally[group] == nil {
					tally[group] = make(map[int]int)
				}
				tally[group][code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("a request failed: %v", failed)
	}
	return tally
}
