package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redistest"
)

// TestRedisStoreTiers: tiers scale a rule's limits in Redis as they do in
// process, on the key's one count: the same admissions as TestTiers.
func TestRedisStoreTiers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	rule := hourly("tiered", 2)
	rule.By = []string{"header X-User"}
	rule.Tiers = map[string][]string{"pro": {"5/1h"}, "banned": {"0/1h"}}
	rule.TierBy = "header X-Plan"
	rule.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, rule)
	send := func(user, plan string, n int) int {
		return admitted(t, h, n, func() *http.Request {
			r := requestFrom("192.0.2.1", false, "X-User", user)
			if plan != "" {
				r.Header.Set("X-Plan", plan)
			}
			return r
		})
	}
	for _, c := range []struct {
		user, plan string
		sent, want int
	}{
		{"ann", "pro", 8, 5},
		{"bob", "", 4, 2},
		{"cid", "platinum", 4, 2},
		{"dan", "banned", 2, 0},
		{"bob", "pro", 8, 3}, // bob upgrades: 2 taken of pro's 5
	} {
		if got := send(c.user, c.plan, c.sent); got != c.want {
			t.Errorf("%s (%q): %d admitted, want %d", c.user, c.plan, got, c.want)
		}
	}
	w := httptest.NewRecorder()
	_ = chain(h).ServeHTTP(w, requestFrom("192.0.2.1", false, "X-User", "ann", "X-Plan", "pro"))
	if got := w.Header().Get("RateLimit-Policy"); got != `"tiered";q=5;w=3600` {
		t.Errorf("pro's policy %q, want q=5", got)
	}
}

// TestRedisStoreCounters: a key Redis denied is denied again by the
// over-limit cache, without a call; the rule's counters say how each
// request was decided. Each node has a cache of its own.
func TestRedisStoreCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	rule := hourly("counted", 2)
	rule.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, rule)
	var got []int
	for range 5 {
		got = append(got, status(t, chain(h), newRequest("192.0.2.7")))
	}
	if want := []int{200, 200, 429, 429, 429}; !equalInts(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	sc := &h.rules[0].stats.store
	if calls, cached := sc.Calls.Load(), sc.OverLimitCached.Load(); calls != 3 || cached != 2 {
		t.Fatalf("%d calls and %d from the over-limit cache, want 3 and 2", calls, cached)
	}
	again := redisHandler(t, srv, rule) // another node: its own cache
	if s := status(t, chain(again), newRequest("192.0.2.7")); s != http.StatusTooManyRequests {
		t.Fatalf("another node: %d, want 429", s)
	}
	if calls := again.rules[0].stats.store.Calls.Load(); calls != 1 {
		t.Fatalf("another node: %d calls, want 1 (its cache is its own)", calls)
	}
}
