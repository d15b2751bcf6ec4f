package integration

import (
	"fmt"
	"testing"
)

// TestExempt checks that clients in an exempt range are never limited,
// while others are; with single addresses and IPv6 too.
func TestExempt(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit {
		name api
		limit 2 30d
		exempt 10.0.0.0/8 198.51.100.7 2001:db8::/32
	}
	respond "ok"
}
`)
	for i, tc := range []struct {
		client  string
		allowed int
	}{
		{"10.1.2.3", 6},
		{"10.200.0.1", 6},
		{"198.51.100.7", 6},
		{"2001:db8::1", 6},
		{"192.0.2.1", 2},
		{"198.51.100.8", 2},
		{"11.0.0.1", 2},
		{"2001:db9::1", 2},
	} {
		got := p.statuses(t, 6, "/", xff(tc.client)...)
		wantStatuses(t, fmt.Sprintf("Test %d: client %s", i, tc.client), got, seq(tc.allowed, 200, 6-tc.allowed, 429))
	}
}
