package integration

import "testing"

// TestCost checks fixed and per-request costs, that a cost that is not a
// whole number ≥ 1 is answered 400, and that an empty cost placeholder
// costs the default 1.
func TestCost(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit /fixed {
		name fixed
		limit 5 30d
		cost 2
	}
	rate_limit /header {
		name header
		limit 5 30d
		algorithm sliding_log
		cost {http.request.header.X-Cost}
	}
	respond "ok"
}
`)
	// 2 + 2 fit in 5; a third 2 does not.
	wantStatuses(t, "cost 2", p.statuses(t, 4, "/fixed"), seq(2, 200, 2, 429))

	for i, tc := range []struct {
		client, cost string
		want         int
	}{
		{"192.0.2.1", "abc", 400},
		{"192.0.2.1", "-1", 400},
		{"192.0.2.1", "1.5", 400},
		{"192.0.2.1", "3", 200},
		{"192.0.2.1", "3", 429}, // 3 + 3 > 5
		{"192.0.2.1", "2", 200}, // the denied 3 took nothing
		{"192.0.2.1", "0", 400}, // a placeholder cost is at least 1: 0 would pass any limit
		{"192.0.2.1", "1", 429},
		{"192.0.2.2", "5", 200},
		{"192.0.2.3", "6", 429}, // more than the limit: never passes
		{"192.0.2.5", "", 200},  // no header: the default cost of 1
		{"192.0.2.5", "", 200},
		{"192.0.2.5", "4", 429}, // 1 + 1 + 4 > 5
		{"192.0.2.5", "3", 200},
	} {
		headers := xff(tc.client)
		if tc.cost != "" {
			headers = append(headers, "X-Cost", tc.cost)
		}
		if got := p.status(t, "/header", headers...); got != tc.want {
			t.Errorf("Test %d: client %s, cost %q: status %d, want %d", i, tc.client, tc.cost, got, tc.want)
		}
	}
	code, h, _ := p.get(t, "/header", append(xff("192.0.2.4"), "X-Cost", "6")...)
	if code != 429 {
		t.Errorf("cost 6 > limit 5: status %d, want 429", code)
	}
	wantRetryAfter(t, "cost 6 > limit 5", h, thirtyDays)
}
