package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisShareConfig is a node of a fleet on one Redis: 30 an hour for
// every request together, with the default on_store_error (local).
const redisShareConfig = `{
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
		name share
		limit 30 1h
		by static k
		store redis
	}
	respond "ok"
}
`

// waitNodes polls p's caddy_rate_limit_store_nodes until it is want, for
// up to 10 s (a heartbeat is 1 s, a node's TTL 5 s).
func waitNodes(t *testing.T, p *caddyProc, want int) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) { // a poll interval
		_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
		if got = metricValue(t, metrics, "caddy_rate_limit_store_nodes"); got == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy_rate_limit_store_nodes %s after 10s, want %d", got, want)
		}
	}
}

// TestRedisShare: three Caddy processes on one Redis count each other
// there (caddy_rate_limit_store_nodes 3 on each). With Redis killed, each
// falls back on its in-process limiter at a third of the limit: 30
// requests of one key to every node, 10 pass on each, 30 in all (the
// limit), not 90. Redis restarted (empty), the nodes count themselves
// again; a node that shuts down leaves at once, without waiting for its
// TTL.
func TestRedisShare(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	var nodes []*caddyProc
	for range 3 {
		nodes = append(nodes, startCaddy(t, redisShareConfig, "EDGELIMIT_REDIS="+srv.Addr))
	}
	for _, p := range nodes {
		waitNodes(t, p, 3)
	}

	srv.Kill()
	total := 0
	for i, p := range nodes {
		tally := count(t, 30, func() int { return p.status(t, "/x") })
		t.Logf("node %d with Redis down: %v", i+1, tally)
		if tally[200] != 10 || tally[429] != 20 {
			t.Errorf("node %d with Redis down: %v, want 10×200 (30/3) and 20×429", i+1, tally)
		}
		total += tally[200]
	}
	if total != 30 {
		t.Errorf("%d admitted by the fleet with Redis down, want 30 (the limit)", total)
	}
	_, metrics := nodes[0].admin(t, http.MethodGet, "/metrics", "")
	if got := metricValue(t, metrics, "caddy_rate_limit_store_nodes"); got != "3" {
		t.Errorf("caddy_rate_limit_store_nodes with Redis down: %s, want the last count, 3", got)
	}

	// empty: every node registers again at its next beat
	srv.Restart()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) { // a poll interval
		n, err := zcard(srv.Addr, "edgelimit:{nodes}")
		if err == nil && n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes (%v) in the restarted Redis after 10s, want 3", n, err)
		}
	}
	nodes[2].stop() // leaves: the others count 2 at their next beat, not after the TTL
	t0 := time.Now()
	for _, p := range nodes[:2] {
		waitNodes(t, p, 2)
	}
	if took := time.Since(t0); took >= 5*time.Second {
		t.Errorf("the others counted 2 after %s: the stopped node did not leave (TTL 5s)", took)
	}
}

// zcard is the size of the sorted set key on the Redis at addr.
func zcard(addr, key string) (int64, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.ZCard(ctx, key).Result()
}
