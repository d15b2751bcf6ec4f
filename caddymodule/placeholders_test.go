package caddymodule

import (
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// A denied request's placeholders show the rule, the key and the wait;
// a second refusal of the same request (a rate_limit handler in
// handle_errors) replaces them; a request never refused shows none.
func TestRefusalPlaceholders(t *testing.T) {
	const shown = "{http.rate_limit.rule} {http.rate_limit.exceeded.name} {http.rate_limit.key} {http.rate_limit.retry_after}"
	h := chain(testHandler(t, testApp(), ruleconfig.Rule{Name: "tight", Algorithm: "token_bucket", Limits: []ruleconfig.Limit{{Count: 1, Window: 3600e9}}}))
	var got []string
	for range 2 {
		r := newRequest("192.0.2.7")
		h.ServeHTTP(httptest.NewRecorder(), r)
		got = append(got, r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).ReplaceAll(shown, "-"))
	}
	if want := []string{"- - - -", "tight tight 192.0.2.7 3600"}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("placeholders %q, want %q", got, want)
	}
	r := newRequest("192.0.2.7")
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	setRefusal(r, repl, shownRefusal{rule: "first", key: "k1", retryAfterSec: 5})
	setRefusal(r, repl, shownRefusal{rule: "second", key: "k2", retryAfterSec: 7})
	if got, want := repl.ReplaceAll(shown, "-"), "second second k2 7"; got != want {
		t.Errorf("after two refusals: %q, want %q", got, want)
	}
}
