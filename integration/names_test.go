package integration

import (
	"fmt"
	"testing"
)

// TestDerivedNames checks rules without a name: each gets one from its
// site, matcher and key, shown in the headers, and rules in different
// sites or under different matchers do not share counters.
func TestDerivedNames(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
http://a.test:{{.HTTP}} {
	rate_limit /api/* {
		limit 2 30d
	}
	rate_limit /other/* {
		limit 2 30d
		by header X-User
	}
	respond "a"
}

http://b.test:{{.HTTP}} {
	rate_limit /api/* {
		limit 2 30d
	}
	@post method POST
	rate_limit @post {
		limit 2 30d
	}
	respond "b"
}
`)
	port := p.data.HTTP
	for i, tc := range []struct {
		host, path string
		headers    []string
		name       string
	}{
		{"a.test", "/api/x", nil, fmt.Sprintf("http://a.test:%d /api/* by ip", port)},
		{"a.test", "/other/x", []string{"X-User", "u1"}, fmt.Sprintf("http://a.test:%d /other/* by header X-User", port)},
		{"b.test", "/api/x", nil, fmt.Sprintf("http://b.test:%d /api/* by ip", port)},
	} {
		what := fmt.Sprintf("Test %d: %s%s", i, tc.host, tc.path)
		headers := append([]string{"Host", tc.host}, tc.headers...)
		code, h, _ := p.get(t, tc.path, headers...)
		if code != 200 {
			t.Errorf("%s: status %d, want 200", what, code)
		}
		if got, want := h.Get("RateLimit-Policy"), fmt.Sprintf(`"%s";q=2;w=%d`, tc.name, thirtyDays); got != want {
			t.Errorf("%s: RateLimit-Policy %q, want %q", what, got, want)
		}
		wantStatuses(t, what, p.statuses(t, 2, tc.path, headers...), seq(1, 200, 1, 429))
	}
	// GETs are not limited by @post.
	wantStatuses(t, "b.test GET /", p.statuses(t, 4, "/", "Host", "b.test"), seq(4, 200, 0, 0))
}
