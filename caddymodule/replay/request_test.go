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

// TestReplayOriginalRequest: a handler that changes the request (uri
// strip_prefix) changes that line's only, and {http.request.orig_uri.*}
// is the line's own request as logged.
func TestReplayOriginalRequest(t *testing.T) {
	r := load(t, site(`
		rule orig-key {
			by {http.request.orig_uri.path}
			limit 1 1h
		}
		rule new-path {
			match {
				path /x
			}
			limit 100 1h
		}
`, "uri strip_prefix /p"+"\n\trespond \"ok\""))
	for i, uri := range []string{"/p/x", "/x", "/p/x", "/y"} {
		r.Replay(entry(100+float64(i), "192.0.2.1", uri))
	}
	s := r.report.Summary()
	// orig-key: keys /p/x, /x, /y, the second /p/x denied; new-path: the
	// two allowed requests whose path is /x once stripped
	if got := summaryRule(t, s, "orig-key"); got.Requests != 4 || got.Denied != 1 || got.Keys != 3 ||
		len(got.TopDenied) != 1 || got.TopDenied[0].Key != "/p/x" {
		t.Errorf("rule orig-key: %+v", got)
	}
	if got := summaryRule(t, s, "new-path"); got.Requests != 2 || got.Denied != 0 {
		t.Errorf("rule new-path: %+v", got)
	}
}
