package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redistest"
)

// concurrentHandler is testHandler with each rule's max_concurrent
// counting in a fresh InFlight.
func concurrentHandler(tb testing.TB, rules ...ruleconfig.Rule) *Handler {
	tb.Helper()
	h := testHandler(tb, testApp(), rules...)
	for _, r := range h.rules {
		if r.MaxConcurrent > 0 {
			r.setConcurrency(newConcurrency(0))
		}
	}
	return h
}

// holding is a next handler that holds each request until release is
// closed, telling entered when it is in.
type holding struct {
	entered chan struct{}
	release chan struct{}
}

func (x *holding) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	x.entered <- struct{}{}
	<-x.release
	w.WriteHeader(http.StatusOK)
	return nil
}

func TestMaxConcurrentAlone(t *testing.T) {
	h := concurrentHandler(t, ruleconfig.Rule{Name: "dl", MaxConcurrent: 2})
	x := &holding{entered: make(chan struct{}, 8), release: make(chan struct{})}
	inF := h.rules[0].conc.inFlight
	done := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() {
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, newRequest("192.0.2.1"), x); err != nil {
				t.Error(err)
			}
			done <- w
		}()
		<-x.entered
	}
	if got := inF.InFlightOf("192.0.2.1"); got != 2 {
		t.Fatalf("in flight %d, want 2", got)
	}
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, newRequest("192.0.2.1"), ok)
	if he, isHE := err.(caddyhttp.HandlerError); !isHE || he.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %v, want 429", err)
	}
	if got, want := w.Header().Get("Retry-After"), "1"; got != want {
		t.Errorf("Retry-After %q, want %q", got, want)
	}
	if got, want := w.Header()[hdrRateLimit], []string{`"dl";r=0`}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got, want := w.Header()[hdrRateLimitPolicy], []string{`"dl";q=2;qu="concurrent-requests"`}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	// another key is unaffected
	w = httptest.NewRecorder()
	if err := h.ServeHTTP(w, newRequest("192.0.2.2"), ok); err != nil || w.Code != http.StatusOK {
		t.Fatalf("other key: %v %d", err, w.Code)
	}
	if got := w.Header()[hdrRateLimit]; len(got) != 1 || got[0] != `"dl";r=1` {
		t.Errorf("other key RateLimit %q, want \"dl\";r=1", got)
	}
	close(x.release)
	<-done
	<-done
	if got := inF.Total(); got != 0 {
		t.Fatalf("in flight after the responses: %d, want 0", got)
	}
	if got := h.rules[0].conc.refused.Load(); got != 1 {
		t.Errorf("refused %d, want 1", got)
	}
}

// TestMaxConcurrentWithLimit: a request refused for concurrency takes no
// rate units; one refused by the rate takes no place.
func TestMaxConcurrentWithLimit(t *testing.T) {
	r := hourly("api", 3)
	r.MaxConcurrent = 1
	h := concurrentHandler(t, r)
	ru := h.rules[0]
	x := &holding{entered: make(chan struct{}, 1), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.ServeHTTP(httptest.NewRecorder(), newRequest("192.0.2.1"), x); err != nil {
			t.Error(err)
		}
	}()
	<-x.entered
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, newRequest("192.0.2.1"), ok)
	if he, isHE := err.(caddyhttp.HandlerError); !isHE || he.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second request: %v, want 429", err)
	}
	if got := w.Header()[hdrRateLimit]; len(got) != 2 || !strings.HasPrefix(got[0], `"api";r=2;t=`) || got[1] != `"api-concurrent";r=0` {
		t.Errorf("RateLimit %q", got)
	}
	close(x.release)
	<-done
	// 1 of 3 taken: two more pass, then the rate denies with no place held
	for i, want := range []int{200, 200, 429} {
		if got := status(t, chain(h), newRequest("192.0.2.1")); got != want {
			t.Fatalf("request %d: %d, want %d", i, got, want)
		}
	}
	if got := ru.conc.inFlight.Total(); got != 0 {
		t.Fatalf("in flight %d, want 0", got)
	}
	// Each request counted once: 3 allowed; denied, the one refused for
	// concurrency and the one the rate refused.
	if st := ru.stats.snapshot(); st.Allowed != 3 || st.Denied != 2 {
		t.Errorf("stats %+v, want 3 allowed, 2 denied", st)
	}
}

// TestMaxConcurrentLaterRuleDenies: a place taken is given back at once
// when a later rule denies.
func TestMaxConcurrentLaterRuleDenies(t *testing.T) {
	h := concurrentHandler(t, ruleconfig.Rule{Name: "c", MaxConcurrent: 1}, hourly("r", 1))
	if got := status(t, chain(h), newRequest("192.0.2.1")); got != 200 {
		t.Fatalf("first: %d", got)
	}
	if got := status(t, chain(h), newRequest("192.0.2.1")); got != 429 {
		t.Fatalf("second: %d, want 429 (rule r)", got)
	}
	if got := h.rules[0].conc.inFlight.Total(); got != 0 {
		t.Fatalf("in flight %d, want 0", got)
	}
}

func TestMaxConcurrentConfig(t *testing.T) {
	for _, c := range []struct {
		rule ruleconfig.Rule
		err  bool
	}{
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3}, false},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: -1}, true},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3, Burst: 2}, true},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3, Cost: "2"}, true},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3, Store: ruleconfig.StoreRedis}, false},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3, LeaseTimeout: 1e9}, true},
		{ruleconfig.Rule{Name: "a", MaxConcurrent: 3, Store: ruleconfig.StoreRedis, LeaseTimeout: 1e6 + 1}, true},
		{ruleconfig.Rule{Name: "a"}, true},
	} {
		if err := validateRule(c.rule); (err != nil) != c.err {
			t.Errorf("%+v: %v", c.rule, err)
		}
	}
}

// BenchmarkMaxConcurrent is the cost of a request under a max_concurrent
// rule beside a rate rule's, as BenchmarkServeHTTP measures it: "rate" is
// one limit, "max-concurrent" the rule with max_concurrent alone,
// "rate+max-concurrent" both in one rule. Every request is admitted and
// its place given back when the chain returns.
func BenchmarkMaxConcurrent(b *testing.B) {
	rate := ruleconfig.Rule{Name: "api", Limits: []ruleconfig.Limit{{Count: 1 << 31, Window: 3600e9}}}
	conc := ruleconfig.Rule{Name: "dl", MaxConcurrent: 8}
	both := rate
	both.Name, both.MaxConcurrent = "both", 8
	for _, bc := range []struct {
		name string
		rule ruleconfig.Rule
	}{{"rate", rate}, {"max-concurrent", conc}, {"rate+max-concurrent", both}} {
		b.Run(bc.name, func(b *testing.B) {
			handler := chain(concurrentHandler(b, bc.rule))
			base := newRequest("5.255.255.7")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				w.Header().Set("Server", "Caddy")
				vars := map[string]any{caddyhttp.ClientIPVarKey: "5.255.255.7"}
				r := base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
				if err := handler.ServeHTTP(w, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMaxConcurrentRulesFile: the EdgeByte YAML reads max_concurrent as
// the Caddyfile does, alone or beside a limit.
func TestMaxConcurrentRulesFile(t *testing.T) {
	rules, err := parseRulesFile([]byte(`rate_limit:
  - path: /downloads/*
    max_concurrent: 2
  - path: /ws/*
    limit: 60
    window: 1m
    max_concurrent: 3
    by: header X-User
`), "rules.yaml", "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].MaxConcurrent != 2 || len(rules[0].Limits) != 0 || rules[1].MaxConcurrent != 3 || len(rules[1].Limits) != 1 {
		t.Fatalf("rules %+v", rules)
	}
	if _, err := parseRulesFile([]byte("rate_limit:\n  - path: /x\n    max_concurrent: 0\n"), "rules.yaml", "p"); err == nil || !strings.Contains(err.Error(), "rules.yaml:3") {
		t.Errorf("max_concurrent 0: %v, want an error at rules.yaml:3", err)
	}
}

// TestMaxConcurrentRedisTiers: with store redis, a tier's factor scales
// the N of each request's lease, as it scales N in process: a free
// user (factor 1/2) holds 2 of the rule's 4 at once, a pro user 4.
func TestMaxConcurrentRedisTiers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t)
	rule := hourly("dl", 100)
	rule.MaxConcurrent = 4
	rule.By = []string{"header X-User"}
	rule.Tiers = map[string][]string{"free": {"50/1h"}}
	rule.TierBy = "header X-Plan"
	rule.Store = ruleconfig.StoreRedis
	h := redisHandler(t, srv, rule)
	h.rules[0].setConcurrency(newConcurrency(0))
	x := &holding{entered: make(chan struct{}, 16), release: make(chan struct{})}
	hold := func(user, plan string, n int) (held int) {
		codes := make(chan int, n)
		for range n {
			go func() {
				w := httptest.NewRecorder()
				r := requestFrom("192.0.2.1", false, "X-User", user, "X-Plan", plan)
				code := w.Code
				var he caddyhttp.HandlerError
				if err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(x.ServeHTTP)); errors.As(err, &he) {
					code = he.StatusCode // a denial, for handle_errors
				} else if err != nil {
					t.Error(err)
				}
				codes <- code
			}()
		}
		// the refused answer at once; the held enter the next handler
		for refused := 0; held+refused < n; {
			select {
			case <-x.entered:
				held++
			case c := <-codes:
				if c != http.StatusTooManyRequests {
					t.Errorf("%s: status %d, want 429", user, c)
				}
				refused++
			}
		}
		return held
	}
	if got := hold("ann", "free", 5); got != 2 {
		t.Errorf("free: %d held at once, want 2", got)
	}
	if got := hold("bob", "", 6); got != 4 {
		t.Errorf("no tier: %d held at once, want 4", got)
	}
	close(x.release)
}
