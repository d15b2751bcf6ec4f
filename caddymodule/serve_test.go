package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// testHandler is a Handler provisioned without a Caddy context: its rules'
// limiters are made here, not taken from the registry.
func testHandler(tb testing.TB, app *App, rules ...ruleconfig.Rule) *Handler {
	tb.Helper()
	return newTestHandler(tb, app, false, rules...)
}

// sharedHandler is testHandler with rules of scope cluster in app's
// cluster: each takes its node's share of a key's limit.
func sharedHandler(tb testing.TB, app *App, rules ...ruleconfig.Rule) *Handler {
	tb.Helper()
	return newTestHandler(tb, app, true, rules...)
}

func newTestHandler(tb testing.TB, app *App, clustered bool, rules ...ruleconfig.Rule) *Handler {
	tb.Helper()
	app.handlers++
	h := &Handler{Rules: rules, logger: zap.NewNop(), denials: zap.NewNop(), app: app}
	for _, cfg := range rules {
		r, err := newRule(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		r.clustered = clustered
		r.attachSources(app)
		cfg := r.LimiterConfig()
		cfg.Shares = clustered
		if r.lim, err = limiter.New(cfg); err != nil {
			tb.Fatal(err)
		}
		r.stats = newRuleStats()
		h.rules = append(h.rules, r)
	}
	return h
}

// newRequest is a request as Caddy's server prepares it: a replacer and
// the vars holding the client IP.
func newRequest(clientIP string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://example.com/api/x", nil)
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer())
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: clientIP})
	return r.WithContext(ctx)
}

// ok is the handler after the rate limit.
var ok = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(http.StatusOK)
	return nil
})

// chain runs handlers in order, as a route does.
func chain(hs ...*Handler) caddyhttp.Handler {
	next := caddyhttp.Handler(ok)
	for i := len(hs) - 1; i >= 0; i-- {
		h, n := hs[i], next
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return h.ServeHTTP(w, r, n)
		})
	}
	return next
}

// status is the status a request gets from handler, counting a returned
// handler error as its status.
func status(t *testing.T, handler caddyhttp.Handler, r *http.Request) int {
	t.Helper()
	w := httptest.NewRecorder()
	if err := handler.ServeHTTP(w, r); err != nil {
		if he, ok := err.(caddyhttp.HandlerError); ok {
			return he.StatusCode
		}
		t.Fatalf("unexpected error: %v", err)
	}
	return w.Code
}

// hourly is a rule of count requests per hour, keyed by client IP.
func hourly(name string, count int64) ruleconfig.Rule {
	return ruleconfig.Rule{Name: name, Limits: []ruleconfig.Limit{{Count: count, Window: caddy.Duration(3600e9)}}}
}

func TestAllOrNothingAcrossHandlers(t *testing.T) {
	app := testApp()
	wide, narrow := testHandler(t, app, hourly("wide", 10)), testHandler(t, app, hourly("narrow", 2))
	h := chain(wide, narrow)
	var got [600]int
	for range 5 {
		got[status(t, h, newRequest("192.0.2.1"))]++
	}
	if got[200] != 2 || got[429] != 3 {
		t.Fatalf("got %d×200 %d×429, want 2×200 3×429", got[200], got[429])
	}
	// The three denied requests took nothing from "wide": 8 units remain.
	for i := range 9 {
		want := http.StatusOK
		if i == 8 {
			want = http.StatusTooManyRequests
		}
		if s := status(t, chain(wide), newRequest("192.0.2.1")); s != want {
			t.Fatalf("request %d to wide alone: got %d, want %d", i, s, want)
		}
	}
}

func TestAllOrNothingWithinHandler(t *testing.T) {
	h := testHandler(t, testApp(), hourly("wide", 10), hourly("narrow", 2))
	for range 5 {
		status(t, chain(h), newRequest("192.0.2.1"))
	}
	if d := h.rules[0].lim.PeekAt("192.0.2.1", time.Now(), 0); d.Quotas[0].Remaining != 8 {
		t.Fatalf("wide has %d remaining, want 8", d.Quotas[0].Remaining)
	}
}

// TestFallbackKeyCannotBeNamed: with on_missing_key ip, a client that sends
// another client's IP as its key does not spend that client's quota.
func TestFallbackKeyCannotBeNamed(t *testing.T) {
	h := chain(testHandler(t, testApp(), ruleconfig.Rule{
		Name:         "api",
		Limits:       []ruleconfig.Limit{{Count: 2, Window: caddy.Duration(time.Hour)}},
		By:           []string{"header X-Api-Key"},
		OnMissingKey: ruleconfig.MissingIP,
	}))
	for range 2 {
		r := newRequest("203.0.113.9")
		r.Header.Set("X-Api-Key", "192.0.2.7")
		status(t, h, r)
	}
	if s := status(t, h, newRequest("192.0.2.7")); s != http.StatusOK {
		t.Fatalf("victim without a key: status %d, want 200", s)
	}
	r := newRequest("203.0.113.9")
	r.Header.Set("X-Api-Key", "\x00192.0.2.7")
	if _, ok := keyOf(testHandler(t, testApp(), ruleconfig.Rule{Name: "k", Limits: []ruleconfig.Limit{{Count: 1, Window: 1e9}}, By: []string{"header X-Api-Key"}}).rules[0].keys, &request{r: r, repl: caddy.NewReplacer()}); ok {
		t.Fatal("a key holding a control character must count as missing")
	}
}

// TestShadowLeakyDoesNotHold: a shadow rule never delays a request.
func TestShadowLeakyDoesNotHold(t *testing.T) {
	h := chain(testHandler(t, testApp(), ruleconfig.Rule{
		Name:      "slow",
		Limits:    []ruleconfig.Limit{{Count: 1, Window: caddy.Duration(time.Hour)}},
		Algorithm: "leaky_bucket",
		MaxDelay:  caddy.Duration(2 * time.Hour),
		Shadow:    true,
	}))
	status(t, h, newRequest("192.0.2.1"))
	// The second request is over the rate: a held request would see its
	// context end and be answered 499.
	r := newRequest("192.0.2.1")
	ctx, cancel := context.WithCancel(r.Context())
	cancel()
	if s := status(t, h, r.WithContext(ctx)); s != http.StatusOK {
		t.Fatalf("status %d, want 200: a shadow rule must not hold a request", s)
	}
}

// TestDenialWithoutErrorRoutes: in a server with no handle_errors routes
// the handler writes the 429 itself, with Retry-After and no body, as
// Caddy's server would for the error; with error routes it returns the
// error for them to render.
func TestDenialWithoutErrorRoutes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		srv       *caddyhttp.Server
		wantError bool
	}{
		{"no error routes", &caddyhttp.Server{}, false},
		{"empty errors block", &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{}}, false},
		{"handle_errors", &caddyhttp.Server{Errors: &caddyhttp.HTTPErrorConfig{Routes: caddyhttp.RouteList{{}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := chain(testHandler(t, testApp(), hourly("api", 1)))
			request := func() *http.Request {
				r := newRequest("192.0.2.1")
				return r.WithContext(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, tc.srv))
			}
			if err := h.ServeHTTP(httptest.NewRecorder(), request()); err != nil {
				t.Fatalf("first request: %v", err)
			}
			w := httptest.NewRecorder()
			err := h.ServeHTTP(w, request())
			if tc.wantError {
				if he, ok := err.(caddyhttp.HandlerError); !ok || he.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("second request: error %v, want a 429 handler error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("second request: error %v, want none (the 429 written)", err)
			}
			if w.Code != http.StatusTooManyRequests || w.Body.Len() != 0 {
				t.Errorf("second request: %d with %d bytes of body, want 429 with none", w.Code, w.Body.Len())
			}
			if secs, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || secs < 1 || secs > 7200 {
				t.Errorf("Retry-After %q, want 1 to 7200 seconds", w.Header().Get("Retry-After"))
			}
		})
	}
}

// TestHeadersOffDecidesAlike: a rule that shows no headers decides its
// allowed requests without their quotas (limiter.AllowInto), and admits
// exactly what the same rule with headers does, each algorithm; its
// denials still say Retry-After, and a later rule's denial still gives
// back what it took.
func TestHeadersOffDecidesAlike(t *testing.T) {
	for _, algo := range []string{"sliding_window", "fixed_window", "token_bucket", "leaky_bucket", "sliding_log"} {
		t.Run(algo, func(t *testing.T) {
			off, on := hourly("off "+algo, 5), hourly("on "+algo, 5)
			off.Headers, off.Algorithm, on.Algorithm = ruleconfig.HeadersOff, algo, algo
			app := testApp()
			hOff, hOn := chain(testHandler(t, app, off)), chain(testHandler(t, app, on))
			request := func() *http.Request { // in a server without handle_errors: the 429 is written
				r := newRequest("192.0.2.1")
				return r.WithContext(context.WithValue(r.Context(), caddyhttp.ServerCtxKey, &caddyhttp.Server{}))
			}
			for i := range 7 {
				wOff, wOn := httptest.NewRecorder(), httptest.NewRecorder()
				if err := hOff.ServeHTTP(wOff, request()); err != nil {
					t.Fatal(err)
				}
				if err := hOn.ServeHTTP(wOn, request()); err != nil {
					t.Fatal(err)
				}
				want := http.StatusOK
				if i >= 5 || algo == "leaky_bucket" && i >= 1 { // a leaky bucket paces: 1 now, no max_delay to wait
					want = http.StatusTooManyRequests
				}
				if wOff.Code != want || wOn.Code != want {
					t.Fatalf("request %d: %d with headers off, %d with them; want %d", i+1, wOff.Code, wOn.Code, want)
				}
				if got := wOff.Header().Get("RateLimit"); got != "" {
					t.Errorf("request %d: RateLimit %q with headers off", i+1, got)
				}
				if want == http.StatusTooManyRequests && wOff.Header().Get("Retry-After") == "" {
					t.Errorf("request %d: a denial without Retry-After", i+1)
				}
			}
		})
	}
	wide := hourly("off wide", 10)
	wide.Headers = ruleconfig.HeadersOff
	app := testApp()
	hw := testHandler(t, app, wide)
	h := chain(hw, testHandler(t, app, hourly("off narrow", 2)))
	var got [600]int
	for range 5 {
		got[status(t, h, newRequest("192.0.2.2"))]++
	}
	if got[200] != 2 || got[429] != 3 {
		t.Fatalf("got %d×200 %d×429, want 2×200 3×429", got[200], got[429])
	}
	d := hw.rules[0].lim.PeekAt("192.0.2.2", time.Now(), 0)
	if r := d.Quotas[0].Remaining; r != 8 {
		t.Errorf("the wide rule keeps %d of 10, want 8: the 3 denied by the narrow one given back", r)
	}
}
