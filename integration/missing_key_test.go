package integration

import (
	"fmt"
	"testing"
)

// TestOnMissingKey checks skip, ip and deny for a rule keyed by a header
// that the request may lack.
func TestOnMissingKey(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit /skip {
		name skip
		limit 2 30d
		by header X-API-Key
		on_missing_key skip
	}
	rate_limit /default {
		name default
		limit 2 30d
		by header X-API-Key
	}
	rate_limit /ip {
		name ip
		limit 2 30d
		by header X-API-Key
		on_missing_key ip
	}
	rate_limit /deny {
		name deny
		limit 2 30d
		by header X-API-Key
		on_missing_key deny
	}
	respond "ok"
}
`)
	for i, tc := range []struct {
		path    string
		headers []string
		want    []int
	}{
		{"/skip", xff("192.0.2.1"), seq(5, 200, 0, 0)},
		{"/skip", []string{"X-API-Key", "a"}, seq(2, 200, 3, 429)},
		{"/default", xff("192.0.2.1"), seq(5, 200, 0, 0)}, // skip is the default
		{"/default", []string{"X-API-Key", "a"}, seq(2, 200, 3, 429)},
		{"/ip", xff("192.0.2.1"), seq(2, 200, 3, 429)},
		{"/ip", xff("192.0.2.2"), seq(2, 200, 3, 429)}, // another IP, its own quota
		{"/ip", []string{"X-API-Key", "a", "X-Forwarded-For", "192.0.2.1"}, seq(2, 200, 3, 429)},
		{"/deny", xff("192.0.2.1"), seq(0, 0, 5, 403)},
		{"/deny", []string{"X-API-Key", "a"}, seq(2, 200, 3, 429)},
		{"/deny", []string{"X-API-Key", "b"}, seq(2, 200, 3, 429)},
	} {
		got := p.statuses(t, 5, tc.path, tc.headers...)
		wantStatuses(t, fmt.Sprintf("Test %d: %s %q", i, tc.path, tc.headers), got, tc.want)
	}
}
