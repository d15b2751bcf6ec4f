package integration

import (
	"fmt"
	"testing"
)

// proxiesCaddyfile limits each client IP to 2 requests.
const proxiesCaddyfile = `
:{{.HTTP}} {
	rate_limit {
		name per_ip
		limit 2 30d
	}
	respond "ok"
}
`

// TestUntrustedForwardedFor checks that without trusted_proxies, a client
// cannot pick its key with X-Forwarded-For: every request from loopback
// counts against 127.0.0.1, whatever it claims.
func TestUntrustedForwardedFor(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+proxiesCaddyfile)
	var got []int
	for i, client := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "", "10.0.0.1"} {
		var headers []string
		if client != "" {
			headers = xff(client)
		}
		got = append(got, p.status(t, fmt.Sprintf("/%d", i), headers...))
	}
	wantStatuses(t, "spoofed X-Forwarded-For", got, seq(2, 200, 3, 429))
}

// TestTrustedForwardedFor checks that with trusted_proxies covering the
// peer (and trusted_proxies_strict), X-Forwarded-For is the client: each
// address has its own quota, and of several, the rightmost that no trusted
// proxy added is the client's, not the leftmost, which the client wrote.
func TestTrustedForwardedFor(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+proxiesCaddyfile)
	for i, client := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.3, 10.9.9.9"} {
		want := seq(2, 200, 1, 429)
		// i == 3: the proxy appended 10.9.9.9, the client's; "192.0.2.3"
		// is what the client wrote, and gets it nothing
		wantStatuses(t, fmt.Sprintf("Test %d: client %q", i, client), p.statuses(t, 3, "/", xff(client)...), want)
	}
	wantStatuses(t, "no X-Forwarded-For: the peer", p.statuses(t, 3, "/"), seq(2, 200, 1, 429))
}
