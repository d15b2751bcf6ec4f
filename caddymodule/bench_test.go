package caddymodule

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// BenchmarkServeHTTP measures what the rate limit adds to a request: the
// same chain with and without the handler, one rule keyed by client IP,
// every request allowed; "with-geo" adds a geo_multiplier, the client's
// country coming from a geoip database, "with-asn" an asn_multiplier,
// its autonomous system from an ASN database, and "by-asn" keys the
// rule by that system instead; "with-headers-off" shows no
// headers (no quotas computed); "with-cluster-…" makes the rule
// shared by a cluster (a share looked up per request), for a key that is
// cold or hot; "with-1000-overrides-not-this-key" gives the rule 1,000
// per-key overrides, none the client's (against "with": the cost of
// overrides present for a key without one), "with-override-this-key"
// one, the client's. Each request gets fresh vars, as
// Caddy's server gives it, in every case.
func BenchmarkServeHTTP(b *testing.B) {
	rule := ruleconfig.Rule{Name: "api", Limits: []ruleconfig.Limit{{Count: 1 << 31, Window: 3600e9}}}
	limited := chain(testHandler(b, testApp(), rule))
	rule.Name, rule.Headers = "quiet", ruleconfig.HeadersOff
	quiet := chain(testHandler(b, testApp(), rule))
	rule.Name, rule.Headers, rule.GeoMultiplier = "geo", "", map[string]float64{"RU": 1.5, "US": 1, "default": 0.5}
	geoLimited := chain(testHandler(b, geoApp(b), rule))
	rule.Name, rule.GeoMultiplier, rule.ASNMultiplier = "asn", nil, map[string]float64{"AS13238": 1.5, "AS15169": 1, "default": 0.5}
	asnLimited := chain(testHandler(b, withASN(b, testApp()), rule))
	rule.Name, rule.ASNMultiplier, rule.By = "by-asn", nil, []string{"asn"}
	byASN := chain(testHandler(b, withASN(b, testApp()), rule))
	rule.By = nil
	// scope cluster in a cluster of 3: the key is cold (the cold share),
	// or hot (tracked, its share set by the cluster)
	rule.Name, rule.GeoMultiplier = "shared", nil
	app, _ := clusterApp(3)
	clustered := chain(sharedHandler(b, app, rule))
	rule.Name = "shared-hot"
	app, sh := clusterApp(3)
	sh.SetRules([]gossip.Rule{{Name: rule.Name, Window: time.Hour, Demand: func(string) uint64 { return 0 }}})
	sh.Track(gossip.KeyHash(rule.Name), "5.255.255.7", 1<<31)
	clusteredHot := chain(sharedHandler(b, app, rule))
	// 1,000 overrides of other keys, and the client's key with one too
	rule.Name = "api" // as "with": the same headers
	overridden := testHandler(b, testApp(), rule)
	for i := range 1000 {
		overridden.rules[0].overrides.Set(limiter.Override{Key: fmt.Sprintf("10.0.%d.%d", i/256, i%256), Factor: 2, SetAt: time.Now()})
	}
	overriddenKey := testHandler(b, testApp(), rule)
	overriddenKey.rules[0].overrides.Set(limiter.Override{Key: "5.255.255.7", Factor: 2, SetAt: time.Now()})
	for _, bc := range []struct {
		name    string
		handler caddyhttp.Handler
	}{{"without", ok}, {"with", limited}, {"with-headers-off", quiet}, {"with-geo", geoLimited}, {"with-asn", asnLimited}, {"by-asn", byASN}, {"with-cluster-cold-key", clustered}, {"with-cluster-hot-key", clusteredHot},
		{"with-1000-overrides-not-this-key", chain(overridden)}, {"with-override-this-key", chain(overriddenKey)}} {
		b.Run(bc.name, func(b *testing.B) { serveLoop(b, bc.handler) })
	}
}

// serveLoop sends handler one client's requests, each with fresh vars.
func serveLoop(b *testing.B, handler caddyhttp.Handler) {
	base := newRequest("5.255.255.7")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Header())
		w.Header().Set("Server", "Caddy") // as Caddy's server does, before any handler
		vars := map[string]any{caddyhttp.ClientIPVarKey: "5.255.255.7"}
		r := base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
		if err := handler.ServeHTTP(w, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAccounting is what the metrics and the top-keys sketch add to
// a decision: the decision counter, the busiest-keys sketch, and the
// sampled timing. "hot" is one key (the handler benchmark's case); "100"
// rotates over keys the sketch holds; "10000" over more keys than it
// holds, so that every request replaces one (the worst case: a flood of
// distinct keys). "parallel" runs "100" from every core, each starting
// at a different key.
func BenchmarkAccounting(b *testing.B) {
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.%d.%d", i/256, i%256)
	}
	start := time.Now()
	for _, n := range []int{1, 100, 10000} {
		name := fmt.Sprint(n)
		if n == 1 {
			name = "hot"
		}
		b.Run(name, func(b *testing.B) {
			s := newRuleStats()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if s.decided(keys[i%n], 1, true, false) {
					observeDecision(start)
				}
				i++
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		s := newRuleStats()
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(37))
			for pb.Next() {
				if s.decided(keys[i%100], 1, true, false) {
					observeDecision(start)
				}
				i++
			}
		})
	})
}

// BenchmarkDenial is what a request costs the handler when it is denied,
// beside one allowed and served by the next handler: one rule keyed by
// client IP, its headers on. Each request gets a fresh replacer and vars,
// and a server without handle_errors routes, as Caddy's server gives
// them, so the denial is written as Caddy would write it.
func BenchmarkDenial(b *testing.B) {
	rule := ruleconfig.Rule{Name: "api", Limits: []ruleconfig.Limit{{Count: 1 << 31, Window: 3600e9}}}
	allowing := chain(testHandler(b, testApp(), rule))
	rule.Name, rule.Limits = "tight", []ruleconfig.Limit{{Count: 1, Window: 3600e9}}
	denying := chain(testHandler(b, testApp(), rule))
	for _, bc := range []struct {
		name    string
		handler caddyhttp.Handler
		status  int
	}{{"allowed", allowing, 200}, {"denied", denying, 429}} {
		b.Run(bc.name, func(b *testing.B) {
			serve := asCaddyServes(b, bc.handler, "5.255.255.7")
			serve(httptest.NewRecorder()) // the tight rule's one allowed request
			first := httptest.NewRecorder()
			if serve(first); first.Code != bc.status {
				b.Fatalf("status %d, want %d", first.Code, bc.status)
			}
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				serve(w)
			}
		})
	}
}

// asCaddyServes is a function serving handler a request from clientIP
// into a recorder as Caddy's server would: the recorder's headers cleared
// but for Server, fresh vars and a fresh replacer (with the server's
// http.* provider) in the request's context, and a server without
// handle_errors routes.
func asCaddyServes(tb testing.TB, handler caddyhttp.Handler, clientIP string) func(*httptest.ResponseRecorder) {
	base := newRequest(clientIP)
	ctx := context.WithValue(base.Context(), caddyhttp.ServerCtxKey, &caddyhttp.Server{})
	return func(w *httptest.ResponseRecorder) {
		clear(w.Header())
		w.Header().Set("Server", "Caddy")
		vars := map[string]any{caddyhttp.ClientIPVarKey: clientIP}
		repl := caddy.NewReplacer()
		repl.Map(func(string) (any, bool) { return nil, false }) // where Caddy's server puts its http.* placeholders
		c := context.WithValue(context.WithValue(ctx, caddy.ReplacerCtxKey, repl), caddyhttp.VarsCtxKey, vars)
		if err := handler.ServeHTTP(w, base.WithContext(c)); err != nil {
			tb.Fatal(err)
		}
	}
}
