package integration

import (
	"strings"
	"testing"
)

// TestMultiZoneAllOrNothing checks that rules are all-or-nothing: zone A
// (10 requests) covers every path, zone B (2 requests) only /both, on the
// same key. Of 5 requests to /both, 2 pass; the 3 that B denies must take
// nothing from A, so A still has exactly 8 requests for /only-a.
func TestMultiZoneAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		caddyfile string
		// headers mark a request as one zone B covers, for configs that
		// tell B's requests by a header rather than by path.
		bothPath, bothHeader, onlyAPath string
	}{
		{
			name: "caddy-ratelimit zones in one handler",
			caddyfile: `
:{{.HTTP}} {
	rate_limit {
		zone a {
			key {remote_host}
			events 10
			window 30d
		}
		zone b {
			key {remote_host}
			events 2
			window 30d
			match {
				path /both*
			}
		}
	}
	respond "ok"
}
`,
			bothPath: "/both", onlyAPath: "/only-a",
		},
		{
			name: "rule blocks in one handler, A first",
			caddyfile: `
:{{.HTTP}} {
	rate_limit {
		rule a {
			limit 10 30d
			by {remote_host}
		}
		rule b {
			limit 2 30d
			by {remote_host} {http.request.header.X-Zone-B}
		}
	}
	respond "ok"
}
`,
			bothPath: "/", bothHeader: "yes", onlyAPath: "/",
		},
		{
			name: "rule blocks in one handler, B first",
			caddyfile: `
:{{.HTTP}} {
	rate_limit {
		rule b {
			limit 2 30d
			by header X-Zone-B
		}
		rule a {
			limit 10 30d
		}
	}
	respond "ok"
}
`,
			bothPath: "/", bothHeader: "yes", onlyAPath: "/",
		},
		{
			name: "two rate_limit handlers in a route, A first",
			caddyfile: `
:{{.HTTP}} {
	route {
		rate_limit {
			name a
			limit 10 30d
		}
		rate_limit /both* {
			name b
			limit 2 30d
		}
		respond "ok"
	}
}
`,
			bothPath: "/both", onlyAPath: "/only-a",
		},
		{
			name: "two rate_limit directives in a site",
			caddyfile: `
:{{.HTTP}} {
	rate_limit {
		name a
		limit 10 30d
	}
	rate_limit /both* {
		name b
		limit 2 30d
	}
	respond "ok"
}
`,
			bothPath: "/both", onlyAPath: "/only-a",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startCaddy(t, plainGlobals+tc.caddyfile)
			var both []string
			if tc.bothHeader != "" {
				both = []string{"X-Zone-B", tc.bothHeader}
			}
			wantStatuses(t, "zones A and B", p.statuses(t, 5, tc.bothPath, both...), seq(2, 200, 3, 429))
			wantStatuses(t, "zone A alone", p.statuses(t, 9, tc.onlyAPath), seq(8, 200, 1, 429))
		})
	}
}

// TestChainErrorGivesBack checks that a request a later rate_limit handler
// answers with an error other than 429 (a bad cost: 400; no key with
// on_missing_key deny: 403) takes nothing from the earlier handler.
func TestChainErrorGivesBack(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	route {
		rate_limit {
			name first
			limit 3 30d
		}
		rate_limit /cost* {
			name priced
			limit 100 30d
			cost {http.request.header.X-Cost}
		}
		rate_limit /keyed* {
			name keyed
			limit 100 30d
			by header X-API-Key
			on_missing_key deny
		}
		respond "ok"
	}
}
`)
	wantStatuses(t, "bad cost", p.statuses(t, 5, "/cost", "X-Cost", "lots"), seq(0, 0, 5, 400))
	wantStatuses(t, "no key", p.statuses(t, 5, "/keyed"), seq(0, 0, 5, 403))
	// None of the 10 took from the first rule: it has all its 3.
	wantStatuses(t, "first rule alone", p.statuses(t, 4, "/"), seq(3, 200, 1, 429))
}

// TestHeadersOnDenialByAnotherRule checks the RateLimit item of a rule
// that had room for a request another rule denied: the request took
// nothing from it, so its item shows the quota untaken.
func TestHeadersOnDenialByAnotherRule(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		rule wide {
			limit 10 30d
			algorithm sliding_log
		}
		rule narrow {
			limit 2 30d
			algorithm sliding_log
		}
	}
	respond "ok"
}
`)
	wantStatuses(t, "within both", p.statuses(t, 2, "/"), seq(2, 200, 0, 0))
	code, h, _ := p.get(t, "/")
	if code != 429 {
		t.Fatalf("third request: status %d, want 429", code)
	}
	var wide string
	for _, v := range h.Values("RateLimit") {
		if strings.HasPrefix(v, `"wide"`) {
			wide = v
		}
	}
	// 2 taken of 10: 8 remain after the denied third request.
	if _, r, _ := parseRateLimit(t, wide); r != 8 {
		t.Errorf("third request (denied by narrow): RateLimit %q for wide, want r=8 (all RateLimit: %q)", wide, h.Values("RateLimit"))
	}
	if code, h, _ := p.get(t, "/other"); code != 429 || len(h.Values("RateLimit")) != 2 {
		t.Errorf("fourth request: %d, RateLimit %q", code, h.Values("RateLimit"))
	}
}
