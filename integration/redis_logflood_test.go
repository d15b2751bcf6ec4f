package integration

import (
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisOutageConfig has one rule on Redis that fails closed, and, with
// {{.Errors}}, a handle_errors route that renders its 503.
const redisOutageConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			probe_interval 1m
		}
	}
}

:{{.HTTP}} {
	rate_limit {
		name outage
		limit 5 1h
		by static k
		store redis
		on_store_error fail_closed
	}
	respond "ok"
	ERRORS
}
`

// TestRedisOutageLogsOnce: with Redis down and on_store_error
// fail_closed, every request is a 503 with Retry-After 1 (rendered by
// handle_errors where the server has it), and the outage is a warning
// once a probe_interval, not an error line per request: Caddy's server
// logs a handler's error of status 500 and above at error level when it
// has no error routes, so a flood of requests was a flood of log lines
// (10,000 requests, 10,003 error lines).
func TestRedisOutageLogsOnce(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	for _, tc := range []struct {
		name, errors, body string
	}{
		{"bare", "", ""},
		{"handle_errors", `handle_errors {
		respond "down: {err.status_code}" {err.status_code}
	}`, "down: 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			p := startCaddy(t, strings.Replace(redisOutageConfig, "ERRORS", tc.errors, 1), "EDGELIMIT_REDIS="+srv.Addr)
			if code := p.status(t, "/"); code != 200 {
				t.Fatalf("with Redis up: %d, want 200", code)
			}
			srv.Kill()
			const n = 1000
			for i := range n {
				code, h, body := p.get(t, "/")
				if code != 503 || h.Get("Retry-After") != "1" || body != tc.body {
					t.Fatalf("request %d with Redis down: %d, Retry-After %q, body %q; want 503, 1, %q", i+1, code, h.Get("Retry-After"), body, tc.body)
				}
			}
			log := p.log()
			if errs := strings.Count(log, `"level":"error"`); errs > 10 {
				t.Errorf("%d error-level log lines for %d refused requests, want at most 10:\n%s", errs, n, firstLines(grepLines(log, `"level":"error"`), 3))
			}
			if warns := strings.Count(log, "rate limit store: redis call failed"); warns == 0 || warns > 3 {
				t.Errorf("%d store warnings, want one per probe interval (1 to 3)", warns)
			}
		})
	}
}

// firstLines is s's first n lines.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
