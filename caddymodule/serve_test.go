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

	"github.com/edgebyte/edgelimit/limiter"
)

// testHandler is a Handler provisioned without a Caddy context: its rules'
// limiters are made here, not taken from the registry.
func testHandler(tb testing.TB, app *App, rules ...Rule) *Handler {
	tb.Helper()
	app.handlers++
	h := &Handler{Rules: rules, logger: zap.NewNop(), app: app}
	for _, cfg := range rules {
		r, err := newRule(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		if r.lim, err = limiter.New(r.limiterConfig()); err != nil {
			tb.Fatal(err)
		}
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
func hourly(name string, count int64) Rule {
	return Rule{Name: name, Limits: []Limit{{Count: count, Window: caddy.Duration(3600e9)}}}
}

func TestAllOrNothingAcrossHandlers(t *testing.T) {
	app := new(App)
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
	h := testHandler(t, new(App), hourly("wide", 10), hourly("narrow", 2))
	for range 5 {
		status(t, chain(h), newRequest("192.0.2.1"))
	}
	if d := h.rules[0].lim.PeekAt("192.0.2.1", time.Now(), 0); d.Quotas[0].Remaining != 8 {
		t.Fatalf("wide has %d remaining, want 8", d.Quotas[0].Remaining)
	}
}
