package replay

import (
	"testing"
)

// TestReplayTrustedProxy: the trusted_proxy var a handler or matcher reads
// is Caddy's verdict on the line's peer: true from a peer in the static
// ranges, false from another, with the client logged or not (Caddy's own
// code finds it then).
func TestReplayTrustedProxy(t *testing.T) {
	r := load(t, `{
	admin off
	servers {
		trusted_proxies static 192.0.2.0/24 2001:db8::/32
	}
}
:8080 {
	@trusted vars {http.vars.trusted_proxy} true
	rate_limit @trusted {
		name trusted-peer
		limit 100 1h
	}
	respond "ok"
}`)
	if len(r.servers[0].line.ranges) != 2 {
		t.Fatalf("static ranges %v, want the two of trusted_proxies: Caddy's field renamed?", r.servers[0].line.ranges)
	}
	for i, tc := range []struct{ peer, client string }{
		{"192.0.2.9:4000", "203.0.113.1"}, // trusted
		{"192.0.2.9:4000", ""},            // trusted, the client found by Caddy in X-Forwarded-For
		{"[2001:db8::5]:4000", "203.0.113.2"},
		{"198.51.100.1:4000", "203.0.113.1"}, // not trusted
		{"198.51.100.1:4000", ""},
		{"[2001:db9::5]:4000", "203.0.113.2"},
	} {
		e := entry(100+float64(i), "203.0.113.1", "/")
		e.Remote, e.Client = tc.peer, tc.client
		e.Header.Set("X-Forwarded-For", "203.0.113.1")
		r.Replay(e)
	}
	if got := summaryRule(t, r.report.Summary(), "trusted-peer"); got.Requests != 3 || got.Keys != 2 {
		t.Fatalf("rule trusted-peer: %+v, want the 3 requests from trusted peers, 2 clients", got)
	}
}
