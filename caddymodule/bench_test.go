package caddymodule

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// BenchmarkServeHTTP measures what the rate limit adds to a request: the
// same chain with and without the handler, one rule keyed by client IP,
// every request allowed; "with-geo" adds a geo_multiplier, the client's
// country coming from a geoip database. Each request gets fresh vars, as
// Caddy's server gives it, in every case.
func BenchmarkServeHTTP(b *testing.B) {
	rule := Rule{Name: "api", Limits: []Limit{{Count: 1 << 31, Window: 3600e9}}}
	limited := chain(testHandler(b, new(App), rule))
	rule.Name, rule.GeoMultiplier = "geo", map[string]float64{"RU": 1.5, "US": 1, "default": 0.5}
	geoLimited := chain(testHandler(b, geoApp(b), rule))
	for _, bc := range []struct {
		name    string
		handler caddyhttp.Handler
	}{{"without", ok}, {"with", limited}, {"with-geo", geoLimited}} {
		b.Run(bc.name, func(b *testing.B) {
			base := newRequest("5.255.255.7")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				w.Header().Set("Server", "Caddy") // as Caddy's server does, before any handler
				vars := map[string]any{caddyhttp.ClientIPVarKey: "5.255.255.7"}
				r := base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
				if err := bc.handler.ServeHTTP(w, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAccounting is what the metrics and the top-keys sketch add to
// a decision: the decision counter, the busiest-keys sketch, and the
// sampled timing; over 1,000 keys, and from every core at once.
func BenchmarkAccounting(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.%d.%d", i/256, i%256)
	}
	s := newRuleStats()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			now := time.Now()
			s.decided(keys[i%len(keys)], 1, true, false)
			sampleDecision(now)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				now := time.Now()
				s.decided(keys[i%len(keys)], 1, true, false)
				sampleDecision(now)
				i++
			}
		})
	})
}
