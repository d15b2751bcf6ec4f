package integration

import (
	"testing"
)

// pathsCaddyfile limits /api/ three ways, a site each: with Caddy's path
// matcher (plain), and with the matcher docs/reference.md recommends
// ("Matching paths behind other servers") as a named matcher (named) and
// in a rule's match block (rule).
const pathsCaddyfile = `{
	{{.Global}}
}
http://plain.test:{{.HTTP}} {
	rate_limit /api/* {
		name plain
		limit 3 1m
	}
	respond "ok"
}
http://named.test:{{.HTTP}} {
	@api path_regexp ` + "`(?i)^(/;[^/]*)*/api([/\\\\;.\\s]|$)`" + `
	rate_limit @api {
		name named
		limit 3 1m
	}
	respond "ok"
}
http://rule.test:{{.HTTP}} {
	rate_limit {
		name rule
		limit 3 1m
		match {
			path_regexp ` + "`(?i)^(/;[^/]*)*/api([/\\\\;.\\s]|$)`" + `
		}
	}
	respond "ok"
}
`

// pathDodges are spellings of /api/x that a backend behind Caddy reads as
// /api/x and Caddy's path matcher /api/* does not match: Java's path
// parameters, IIS's trailing dots and spaces and its backslash.
var pathDodges = []string{"/api;/x", "/api;x=1/x", "/;x/api/x", "/api./x", "/api../x", "/api%20/x", "/api.%20./x", "/api%5Cx"}

// TestPathsBehindOtherServers: the dodges of /api/* (a Java backend's
// /api;/x, an IIS backend's /api./x) pass Caddy's path matcher, as
// docs/reference.md says; the recommended matcher, named or in a rule's
// match block, limits them with /api/x: 3 served, then 429s. Spellings
// Caddy's matcher already covers (case, escapes, dot segments, doubled
// slashes) are limited by all three.
func TestPathsBehindOtherServers(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, pathsCaddyfile)
	for _, site := range []string{"plain.test", "named.test", "rule.test"} {
		host := []string{"Host", site}
		wantStatuses(t, site+" /api/x", p.statuses(t, 3, "/api/x", host...), seq(3, 200, 0, 0))
		var got []int
		for _, path := range pathDodges {
			got = append(got, p.status(t, path, host...))
		}
		want := seq(0, 0, len(pathDodges), 429)
		if site == "plain.test" {
			want = seq(len(pathDodges), 200, 0, 0) // Caddy's path matcher: not limited
		}
		wantStatuses(t, site+" dodges", got, want)
		got = got[:0]
		for _, path := range []string{"/API/x", "/%61pi/x", "/x/../api/x", "//api/x", "/./api/x"} {
			got = append(got, p.status(t, path, host...))
		}
		wantStatuses(t, site+" spellings Caddy cleans", got, seq(0, 0, 5, 429))
		wantStatuses(t, site+" /apis/x, another path", p.statuses(t, 1, "/apis/x", host...), seq(1, 200, 0, 0))
	}
}
