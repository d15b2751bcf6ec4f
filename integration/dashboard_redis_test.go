package integration

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// dashboardRedisCaddyfile is dashboardCaddyfile's admin set-up with one
// rule, api, kept in Redis.
const dashboardRedisCaddyfile = `{
` + dashboardAdmin + `
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
		}
	}
}

:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit 5 1h
		store redis
		on_store_error fail_closed
	}
	respond "ok"
}
`

// TestDashboardRedis: the dashboard shows a rule kept in Redis as such,
// reads a key's state from Redis and resets it there, as for a local
// rule: after the page's reset the key's hash is gone from Redis and the
// key has its 5 again.
func TestDashboardRedis(t *testing.T) {
	srv := redistest.Start(t)
	p := startCaddy(t, dashboardRedisCaddyfile, "EDGELIMIT_REDIS="+srv.Addr)
	pg := openDashboard(t, p, "")
	wantStatuses(t, "A", p.statuses(t, 7, "/api/x", xff(clientA)...), seq(5, 200, 2, 429))

	pg.showRule("api")
	pg.waitFor("the page says the rule is in Redis", textHas(`#rule-facts [data-field="store"]`, "redis: one limit for every node; fail_closed")+
		" && "+textHas(`#rule-facts [data-field="keys"]`, "in Redis")+" && "+textHas("#top-scope", "As this node saw them"))
	pg.waitFor("most denied: A 2", textIs(`#top-denied tbody`, clientA+"\t2"))
	pg.lookUp(clientA)
	pg.waitFor("A has used its 5, in Redis", textIs(`#key-state [data-field="used"]`, "5")+" && "+textIs(`#key-state [data-field="remaining"]`, "0"))

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "edgelimit:api:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("Redis keys of rule api: %v (%v), want A's one hash", keys, err)
	}
	pg.reset(clientA)
	pg.waitFor("A shows 5 remaining", textIs(`#key-state [data-field="remaining"]`, "5"))
	if n, err := rdb.Exists(context.Background(), keys[0]).Result(); err != nil || n != 0 {
		t.Fatalf("after the page's reset, %s exists: %d (%v), want gone", keys[0], n, err)
	}
	wantStatuses(t, "A after the reset", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
}
