package caddymodule

import (
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// TestRequestAllocations pins what the handler allocates for a request,
// beyond what serving it as Caddy does costs without the handler: an
// allowed request with RateLimit headers one allocation (its header
// values), and so does one with headers off (none); a denial two (its
// header values with Retry-After and its placeholders' storage, and the
// placeholders' provider), with the legacy headers too.
func TestRequestAllocations(t *testing.T) {
	tight := []ruleconfig.Limit{{Count: 1, Window: 3600e9}}
	wide := []ruleconfig.Limit{{Count: 1 << 31, Window: 3600e9}}
	for _, tc := range []struct {
		name    string
		rule    ruleconfig.Rule
		status  int
		handler float64
	}{
		{"allowed", ruleconfig.Rule{Name: "a", Limits: wide}, 200, 1},
		{"allowed, headers off", ruleconfig.Rule{Name: "b", Limits: wide, Headers: ruleconfig.HeadersOff}, 200, 0},
		{"allowed, both headers", ruleconfig.Rule{Name: "c", Limits: wide, Headers: ruleconfig.HeadersBoth}, 200, 1},
		{"denied", ruleconfig.Rule{Name: "d", Limits: tight}, 429, 2},
		{"denied, both headers", ruleconfig.Rule{Name: "e", Limits: tight, Headers: ruleconfig.HeadersBoth}, 429, 2},
		{"denied, headers off", ruleconfig.Rule{Name: "f", Limits: tight, Headers: ruleconfig.HeadersOff}, 429, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := asCaddyServes(t, chain(testHandler(t, testApp(), tc.rule)), "5.255.255.7")
			serve(httptest.NewRecorder()) // the tight rule's one allowed request, the key's first
			w := httptest.NewRecorder()
			if serve(w); w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			alone := asCaddyServes(t, caddyhttp.Handler(ok), "5.255.255.7")
			got := testing.AllocsPerRun(100, func() { serve(w) }) - testing.AllocsPerRun(100, func() { alone(w) })
			if got != tc.handler {
				t.Errorf("the handler allocates %v times a request, want %v", got, tc.handler)
			}
		})
	}
}
