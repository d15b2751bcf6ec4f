package caddymodule

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkServeHTTP measures what the rate limit adds to a request: the
// same chain with and without the handler, one rule keyed by client IP,
// every request allowed. Each request gets fresh vars, as Caddy's server
// gives it, in both cases.
func BenchmarkServeHTTP(b *testing.B) {
	limited := chain(testHandler(b, new(App), Rule{Name: "api", Limits: []Limit{{Count: 1 << 31, Window: 3600e9}}}))
	for _, bc := range []struct {
		name    string
		handler caddyhttp.Handler
	}{{"without", ok}, {"with", limited}} {
		b.Run(bc.name, func(b *testing.B) {
			base := newRequest("203.0.113.7")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				w.Header().Set("Server", "Caddy") // as Caddy's server does, before any handler
				vars := map[string]any{caddyhttp.ClientIPVarKey: "203.0.113.7"}
				r := base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
				if err := bc.handler.ServeHTTP(w, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
