package caddymodule

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
)

// Without a fleet running (unit tests, a config not started yet) a rule
// falls back on its whole limit.
func TestFallbackShareAlone(t *testing.T) {
	for i, st := range []*ruleStore{nil, {}, {rule: "x"}} {
		if got := st.fallbackShare(); got != 1 {
			t.Errorf("Test %d: share %v, want 1", i, got)
		}
	}
	if got := testApp().storeNodes(); got != 1 {
		t.Errorf("app without a store: %v nodes, want 1", got)
	}
}

// TestFallbackShare: with three nodes counted in Redis, a rule's share is
// a third (30 a hour: 10 on this node, at limiter.ScaledCount); a node
// that leaves is out of Redis at once. A second app on the same fleet (a
// reload) keeps its heartbeat and node id; the last one stops it.
func TestFallbackShare(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	r := hourly("shared:{x}", 30) // a name Escape changes
	r.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, r)
	app := h.app
	st := h.rules[0].store

	l := redispool.AcquireFleet(app.redis.fleetKey(), zap.NewNop())
	again := redispool.AcquireFleet(app.redis.fleetKey(), zap.NewNop()) // a reload: the new config joins before the old leaves
	if l == nil || again != l {
		t.Fatalf("joins %p, %p: want one heartbeat", l, again)
	}
	ctx := context.Background()
	others := make([]*redisstore.Fleet, 2)
	for i := range others {
		f, err := redisstore.NewFleet(app.redis.client.Redis, redisstore.FleetConfig{KeyPrefix: app.redis.settings.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		others[i] = f
	}
	if n, err := l.Fleet.Beat(ctx); err != nil || n != 3 {
		t.Fatalf("beat: %d nodes (%v), want 3", n, err)
	}
	if got := st.fallbackShare(); got != 1.0/3 {
		t.Errorf("share with 3 nodes: %v, want 1/3", got)
	}
	if got := limiter.ScaledCount(30, st.fallbackShare()); got != 10 {
		t.Errorf("limit 30 at the share of 3 nodes: %d, want 10", got)
	}
	if got := app.storeNodes(); got != 3 {
		t.Errorf("storeNodes %v, want 3", got)
	}
	if err := others[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Fleet.Beat(ctx); err != nil || n != 2 || st.fallbackShare() != 0.5 {
		t.Errorf("after one left: %d nodes (%v), share %v; want 2, 1/2", n, err, st.fallbackShare())
	}

	id := l.Fleet.ID()
	redispool.ReleaseFleet(again) // the old config goes
	if f := redispool.LookupFleet(app.redis.fleetKey()); f == nil || f.ID() != id {
		t.Fatalf("after the first leave: fleet %v, want the same node %s running", f, id)
	}
	redispool.ReleaseFleet(l) // the last
	if f := redispool.LookupFleet(app.redis.fleetKey()); f != nil || st.fallbackShare() != 1 {
		t.Errorf("after the last leave: fleet %v, share %v; want none, 1", f, st.fallbackShare())
	}
	if err := app.redis.client.Redis.ZScore(ctx, l.Fleet.Key(), id).Err(); err == nil {
		t.Errorf("node %s still in %s after the last leave", id, l.Fleet.Key())
	}
}

// TestFallbackShareStart: App.Start joins the fleet of its Redis and key
// prefix, its heartbeat counts the node in Redis at once, and Cleanup
// leaves it.
func TestFallbackShareStart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	cfg := &appconfig.RedisConfig{Addresses: []string{srv.Addr}, KeyPrefix: "unit:" + t.Name() + ":"}
	s, err := cfg.Settings()
	if err != nil {
		t.Fatal(err)
	}
	app := &App{SweepInterval: 60e9, Store: &appconfig.StoreConfig{Redis: cfg}, logger: zap.NewNop()}
	if app.redis, err = provisionRedis(app.Store); err != nil {
		t.Fatal(err)
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	key := s.Prefix + redisstore.FleetKey
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a poll interval
		if n, _ := app.redis.client.Redis.ZCard(ctx, key).Result(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node in %s 10s after Start", key)
		}
	}
	client := app.redis.client.Redis
	if err := app.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if app.redis.fleet != nil || redispool.LookupFleet(redispool.FleetKey{Client: client, Prefix: s.Prefix}) != nil {
		t.Error("fleet still running after Cleanup")
	}
	other := redis.NewClient(&redis.Options{Addr: srv.Addr}) // the app's is closed
	defer other.Close()
	if n, err := other.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("%s after Cleanup: exists %d (%v), want gone", key, n, err)
	}
}

// TestFallbackShareServe: with three nodes counted and Redis killed, a
// rule of 30 an hour with on_store_error local admits 10 of 30 requests
// of one key on this node (its third), the rest 429.
func TestFallbackShareServe(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	r := hourly("share", 30)
	r.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, r)
	app := h.app
	l := redispool.AcquireFleet(app.redis.fleetKey(), zap.NewNop())
	t.Cleanup(func() { redispool.ReleaseFleet(l) })
	ctx := context.Background()
	for range 2 {
		f, err := redisstore.NewFleet(app.redis.client.Redis, redisstore.FleetConfig{KeyPrefix: app.redis.settings.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.Fleet.Beat(ctx); err != nil || n != 3 {
		t.Fatalf("beat: %d nodes (%v), want 3", n, err)
	}
	srv.Kill()
	tally := map[int]int{}
	for range 30 {
		tally[status(t, chain(h), newRequest("192.0.2.9"))]++
	}
	if tally[200] != 10 || tally[429] != 20 {
		t.Errorf("30 requests with Redis down and 3 nodes: %v, want 10×200 and 20×429", tally)
	}
	// the headers show the fleet's limit, and what is left of it here
	w := httptest.NewRecorder()
	_ = chain(h).ServeHTTP(w, newRequest("192.0.2.10"))
	if got, want := w.Header().Get("RateLimit-Policy"), `"share";q=30;w=3600`; got != want {
		t.Errorf("fallback policy %q, want %q", got, want)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"share";r=9;`) {
		t.Errorf("fallback RateLimit %q, want 9 remaining of this node's 10", got)
	}
	// and so do they when a later rule denies, and the units come back
	narrow := testHandler(t, app, hourly("narrow", 1))
	app.handlers = 2
	both := chain(h, narrow)
	_ = both.ServeHTTP(httptest.NewRecorder(), newRequest("192.0.2.11"))
	w = httptest.NewRecorder()
	_ = both.ServeHTTP(w, newRequest("192.0.2.11"))
	if got := w.Header().Get("RateLimit-Policy"); !strings.Contains(got, `"share";q=30;w=3600`) {
		t.Errorf("after narrow denied: policy %q, want share's q=30", got)
	}
}
