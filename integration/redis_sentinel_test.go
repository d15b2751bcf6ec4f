package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisSentinelConfig is a node of a fleet whose Redis is the master that
// three Sentinels name, each side with its own password: /x is limited to
// 200 an hour per X-Key, decided in Redis or refused (503) when it cannot
// decide within the timeout.
const redisSentinelConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_SENTINEL_1} {env.EDGELIMIT_SENTINEL_2} {env.EDGELIMIT_SENTINEL_3}
			sentinel_master mymaster
			password {env.EDGELIMIT_REDIS_PASSWORD}
			sentinel_password {env.EDGELIMIT_SENTINEL_PASSWORD}
			timeout 2s
			probe_interval 200ms
		}
	}
}

:{{.HTTP}} {
	rate_limit /x {
		name sentinel_exact
		limit 200 1h
		by header X-Key
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestRedisSentinel: two Caddy processes on a master found through three
// Sentinels (with passwords on both). 600 requests on one key from 32
// connections: exactly 200 pass. The master killed (its writes
// replicated), every request is answered within the timeout, 503 by
// fail_closed, until the Sentinels have promoted the replica; then the
// new master decides: the spent key stays spent (429, never 200), a fresh
// key gets exactly 200 of 600, and its state is on the new master.
func TestRedisSentinel(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	const sentinelPass, masterPass = "sentinel-secret", "master-secret"
	sn := redistest.StartSentinel(t, redistest.SentinelOptions{Password: sentinelPass, MasterPassword: masterPass})
	env := []string{"EDGELIMIT_SENTINEL_PASSWORD=" + sentinelPass, "EDGELIMIT_REDIS_PASSWORD=" + masterPass}
	for i, a := range sn.Addrs() {
		env = append(env, fmt.Sprintf("EDGELIMIT_SENTINEL_%d=%s", i+1, a))
	}
	nodes := []*caddyProc{startCaddy(t, redisSentinelConfig, env...), startCaddy(t, redisSentinelConfig, env...)}
	exact := func(key string) {
		t.Helper()
		tally := fanOut(t, nodes, 600, 32, func(int) (string, string, []string) { return key, "/x", []string{"X-Key", key} })
		if got := tally[key]; got[200] != 200 || got[429] != 400 || len(got) != 2 {
			t.Errorf("key %s: statuses %v, want exactly 200×200 and 400×429", key, got)
		}
	}
	exact("before")
	sn.WaitReplicated(t, sn.Master.Addr)

	t0 := time.Now()
	sn.Master.Kill()
	var slowest time.Duration
	during := make(map[int]int)
	for i, p := range nodes {
		for {
			t1 := time.Now()
			code, h, _ := p.get(t, "/x", "X-Key", "before")
			slowest = max(slowest, time.Since(t1))
			during[code]++
			if code == 429 {
				break
			}
			if code != 503 || h.Get("Retry-After") != "1" {
				t.Fatalf("node %d, spent key during the failover: %d (Retry-After %q), want 503 with Retry-After 1, or 429", i, code, h.Get("Retry-After"))
			}
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("node %d: still 503 30s after the master was killed", i)
			}
			time.Sleep(20 * time.Millisecond) // a poll interval
		}
	}
	t.Logf("master killed: both nodes decide on Redis again after %s; statuses meanwhile %v, the slowest took %s",
		time.Since(t0).Round(time.Millisecond), during, slowest.Round(time.Millisecond))
	if slowest > 3*time.Second {
		t.Errorf("a request took %s during the failover, want under 3s (timeout 2s)", slowest)
	}

	master := sn.WaitMaster(t, sn.Master.Addr)
	exact("after")
	c := redis.NewClient(&redis.Options{Addr: master.Addr, Password: masterPass})
	t.Cleanup(func() { c.Close() })
	if n, err := c.Exists(context.Background(), "edgelimit:sentinel_exact:{after}").Result(); n != 1 || err != nil {
		t.Errorf("the fresh key on the new master %s: exists %d, %v", master.Addr, n, err)
	}
	var view adminKey
	nodes[1].adminJSON(t, "/rate_limit/rules/sentinel_exact/keys/before", &view)
	if len(view.Limits) != 1 || view.Limits[0].Used != 200 {
		t.Errorf("admin view of the spent key on the new master: %+v, want 200 used", view)
	}
}
