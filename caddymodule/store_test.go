package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/redisstore"
)

// redisHandler is a handler whose rules have store redis on srv, with a
// short probe interval.
func redisHandler(t *testing.T, srv *redistest.Server, rules ...ruleconfig.Rule) *Handler {
	t.Helper()
	// A call's timeout of 1 s, not the default 50 ms: under -race on two
	// busy cores a call to a live Redis can take longer than 50 ms, and a
	// test that counts Redis's decisions must not see a fallback instead
	// (TestRedisStoreCounters and TestMaxConcurrentRedisTiers flaked so).
	// A Redis killed by a test refuses at once, well within it.
	cfg := &appconfig.RedisConfig{Addresses: []string{srv.Addr}, KeyPrefix: "unit:" + t.Name() + ":",
		ProbeInterval: caddy.Duration(50 * time.Millisecond), Timeout: caddy.Duration(time.Second)}
	app := &App{Store: &appconfig.StoreConfig{Redis: cfg}, logger: zap.NewNop()}
	var err error
	if app.redis, err = provisionRedis(app.Store); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.redis.cleanup)
	h := testHandler(t, app, rules...)
	for _, r := range h.rules {
		if r.store, err = app.storeFor(r); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// TestRedisStoreServe: decisions come from Redis (two handlers on one
// Redis share the limit); a denial by another rule gives the units back
// in Redis; with Redis gone each on_store_error applies within the
// timeout; back, Redis decides again.
func TestRedisStoreServe(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	rule := func(name, mode string, n int64) ruleconfig.Rule {
		r := hourly(name, n)
		r.Store, r.OnStoreError = ruleconfig.StoreRedis, mode
		return r
	}
	// two nodes: one Redis
	a := chain(redisHandler(t, srv, rule("shared", "", 3)))
	b := chain(redisHandler(t, srv, rule("shared", "", 3)))
	var got []int
	for i := range 5 {
		h := a
		if i%2 == 1 {
			h = b
		}
		got = append(got, status(t, h, newRequest("192.0.2.1")))
	}
	if want := []int{200, 200, 200, 429, 429}; !equalInts(got, want) {
		t.Fatalf("two handlers on one Redis: %v, want %v", got, want)
	}

	// all or nothing: a local rule that denies gives the Redis units back
	h := redisHandler(t, srv, rule("wide", "", 10))
	both := chain(h, testHandler(t, h.app, hourly("narrow", 1)))
	h.app.handlers = 2
	w := httptest.NewRecorder()
	if err := both.ServeHTTP(w, newRequest("192.0.2.2")); err != nil || w.Header().Get("RateLimit") == "" {
		t.Fatalf("first: %v %v", err, w.Header())
	}
	for range 3 {
		status(t, both, newRequest("192.0.2.2"))
	}
	d, err := h.rules[0].store.store.Peek(context.Background(), "192.0.2.2", 0)
	if err != nil || d.Quotas[0].Remaining != 9 {
		t.Fatalf("wide in Redis after 1 allowed and 3 denied by narrow: remaining %d (%v), want 9", d.Quotas[0].Remaining, err)
	}

	modes := chain(redisHandler(t, srv, rule("m_local", ruleconfig.StoreErrorLocal, 2)))
	open := chain(redisHandler(t, srv, rule("m_open", ruleconfig.StoreErrorFailOpen, 2)))
	closed := redisHandler(t, srv, rule("m_closed", ruleconfig.StoreErrorFailClosed, 2))
	problemRule := rule("m_closed_problem", ruleconfig.StoreErrorFailClosed, 2)
	problemRule.ProblemJSON = true
	closedProblem := redisHandler(t, srv, problemRule)
	status(t, modes, newRequest("192.0.2.3")) // Redis: 1 of 2
	srv.Kill()
	start := time.Now()
	got = got[:0]
	for range 4 {
		got = append(got, status(t, modes, newRequest("192.0.2.3")))
	}
	if want := []int{200, 200, 429, 429}; !equalInts(got, want) {
		t.Errorf("local fallback: %v, want %v (the in-process limit, afresh)", got, want)
	}
	for range 3 {
		if s := status(t, open, newRequest("192.0.2.3")); s != http.StatusOK {
			t.Errorf("fail_open: %d", s)
		}
	}
	w = httptest.NewRecorder()
	err = chain(closed).ServeHTTP(w, newRequest("192.0.2.3"))
	if he, ok := err.(caddyhttp.HandlerError); !ok || he.StatusCode != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Errorf("fail_closed: %v, Retry-After %q; want 503 and 1", err, w.Header().Get("Retry-After"))
	}
	// with problem_json: draft-11's temporary-reduced-capacity problem
	w = httptest.NewRecorder()
	if err := chain(closedProblem).ServeHTTP(w, newRequest("192.0.2.3")); err != nil {
		t.Errorf("fail_closed problem_json: %v", err)
	}
	wantBody := `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",` +
		`"title":"Request cannot be satisfied due to temporary reduced capacity","status":503,"detail":"Retry in 1 seconds."}`
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" ||
		w.Header().Get("Content-Type") != "application/problem+json" || w.Body.String() != wantBody {
		t.Errorf("fail_closed problem_json: %d, Retry-After %q, %q %s; want 503, 1, application/problem+json %s",
			w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), w.Body, wantBody)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("9 requests with Redis down took %s", took)
	}
	if n := closed.rules[0].stats.fallbacks[modeIndex(ruleconfig.StoreErrorFailClosed)].Load(); n != 1 {
		t.Errorf("fail_closed fallbacks %d, want 1", n)
	}
	if storeErrors[0].Load()+storeErrors[1].Load() == 0 {
		t.Error("no store error counted")
	}
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for chain(closed).ServeHTTP(httptest.NewRecorder(), newRequest("192.0.2.3")) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis back, but fail_closed still refuses after 10s")
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
	if st := closed.rules[0].store.store.Breaker().State(); st != redisstore.Closed {
		t.Errorf("breaker %s after a success", st)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRedisStoreScriptError: Redis answers with an error (a key of another
// type under the rule's prefix): on_store_error applies, the error counts
// as reason script, and Redis is not avoided (the breaker stays closed).
func TestRedisStoreScriptError(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	r := hourly("wrongtype", 5)
	r.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, r)
	st := h.rules[0].store
	if err := st.client.Set(context.Background(), st.store.RedisKeys("192.0.2.9")[0], "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := storeErrors[2].Load()
	if s := status(t, chain(h), newRequest("192.0.2.9")); s != http.StatusOK {
		t.Fatalf("status %d, want 200 from the local fallback", s)
	}
	if storeErrors[2].Load() != before+1 {
		t.Errorf("script errors %d, want %d", storeErrors[2].Load(), before+1)
	}
	if n := h.rules[0].stats.fallbacks[0].Load(); n != 1 {
		t.Errorf("local fallbacks %d, want 1", n)
	}
	if s := st.store.Breaker().State(); s != redisstore.Closed {
		t.Errorf("breaker %s after a script error, want closed", s)
	}
	if s := status(t, chain(h), newRequest("192.0.2.10")); s != http.StatusOK || st.down.Load() {
		t.Errorf("another key: %d, down %v; want 200 from Redis", s, st.down.Load())
	}
}
