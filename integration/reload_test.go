package integration

import (
	"fmt"
	"strings"
	"testing"
)

// reloadCaddyfile is a config whose rule's limit is LIMIT and whose
// unrelated /version route answers VERSION; RULE_NAME is the rule's name
// line, or nothing for a derived name.
const reloadCaddyfile = plainGlobals + `
:{{.HTTP}} {
	rate_limit /api/* {
		RULE_NAME
		limit LIMIT 30d
	}
	respond /version "VERSION"
	respond "ok"
}
`

// TestReloadKeepsCounters checks that a config reload keeps the counters
// of a rule whose name is unchanged, whether the name is explicit or
// derived from the site, the matcher and the key, while its limit
// changes, and when only an unrelated directive changes.
func TestReloadKeepsCounters(t *testing.T) {
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			t.Parallel()
			config := func(limit int, version string) string {
				name := "name kept"
				if !named {
					name = ""
				}
				return strings.NewReplacer("RULE_NAME", name, "LIMIT", fmt.Sprint(limit), "VERSION", version).Replace(reloadCaddyfile)
			}
			p := startCaddy(t, config(5, "v1"))
			wantStatuses(t, "limit 5", p.statuses(t, 3, "/api/x"), seq(3, 200, 0, 0))

			p.reload(t, config(6, "v1"))
			wantStatuses(t, "limit 5 → 6", p.statuses(t, 4, "/api/x"), seq(3, 200, 1, 429))

			p.reload(t, config(4, "v1"))
			wantStatuses(t, "limit 6 → 4", p.statuses(t, 2, "/api/x"), seq(0, 0, 2, 429))

			p.reload(t, config(4, "v2"))
			if code, _, body := p.get(t, "/version"); code != 200 || body != "v2" {
				t.Fatalf("after reloading an unrelated change: /version %d %q, want 200 \"v2\"", code, body)
			}
			wantStatuses(t, "unrelated change", p.statuses(t, 2, "/api/x"), seq(0, 0, 2, 429))

			p.reload(t, config(8, "v3"))
			wantStatuses(t, "limit 4 → 8", p.statuses(t, 3, "/api/x"), seq(2, 200, 1, 429))
		})
	}
}

// TestReloadNewNameStartsAfresh checks the other side: a rule whose name
// changes gets new counters.
func TestReloadNewNameStartsAfresh(t *testing.T) {
	t.Parallel()
	config := func(name string) string {
		return strings.NewReplacer("RULE_NAME", "name "+name, "LIMIT", "2", "VERSION", name).Replace(reloadCaddyfile)
	}
	p := startCaddy(t, config("first"))
	wantStatuses(t, "first", p.statuses(t, 3, "/api/x"), seq(2, 200, 1, 429))
	p.reload(t, config("second"))
	wantStatuses(t, "second", p.statuses(t, 3, "/api/x"), seq(2, 200, 1, 429))
}

// TestReloadChangingBurstAndHeaders checks that a reload changing the
// burst (the bucket kept) or a directive outside the limiter (headers)
// keeps the counters.
func TestReloadChangingBurstAndHeaders(t *testing.T) {
	t.Parallel()
	const config = plainGlobals + `
:{{.HTTP}} {
	rate_limit {
		name shaped
		limit 5 30d
		burst BURST
		HEADERS
	}
	respond "ok"
}
`
	p := startCaddy(t, strings.NewReplacer("BURST", "4", "HEADERS", "").Replace(config))
	wantStatuses(t, "burst 4", p.statuses(t, 3, "/"), seq(3, 200, 0, 0))
	// The window has 2 left, the bucket 1 (+3 with burst 6).
	p.reload(t, strings.NewReplacer("BURST", "6", "HEADERS", "").Replace(config))
	wantStatuses(t, "burst 4 → 6", p.statuses(t, 3, "/"), seq(2, 200, 1, 429))
	p.reload(t, strings.NewReplacer("BURST", "6", "HEADERS", "headers both").Replace(config))
	code, h, _ := p.get(t, "/")
	if code != 429 || h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("after adding headers both: %d, X-RateLimit-Remaining %q; want 429, 0", code, h.Get("X-RateLimit-Remaining"))
	}
}

// TestReloadAddingBurstOrLimitKeepsCounters checks docs/DESIGN.md's Reloads
// contract ("keeps counters of every rule whose name is unchanged") when a
// reload adds a burst bucket in front of a window, or a second limit: the
// window's count is the same state before and after.
func TestReloadAddingBurstOrLimitKeepsCounters(t *testing.T) {
	for _, tc := range []struct{ name, before, after string }{
		{"adding burst", "limit 5 30d", "limit 5 30d\n\t\tburst 10"},
		{"adding a limit", "limit 5 30d", "limit 5 30d\n\t\tlimit 1000 1d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const config = plainGlobals + `
:{{.HTTP}} {
	rate_limit {
		name growing
		LIMITS
	}
	respond "ok"
}
`
			p := startCaddy(t, strings.Replace(config, "LIMITS", tc.before, 1))
			wantStatuses(t, "before", p.statuses(t, 3, "/"), seq(3, 200, 0, 0))
			p.reload(t, strings.Replace(config, "LIMITS", tc.after, 1))
			wantStatuses(t, "after", p.statuses(t, 3, "/"), seq(2, 200, 1, 429))
		})
	}
}
