package integration

import (
	"fmt"
	"testing"
)

// TestShadow checks that a shadow rule never rejects, but its headers
// show the quota running out.
func TestShadow(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name trial
		limit 2 30d
		algorithm sliding_log
		shadow
	}
	respond "ok"
}
`)
	for k := 1; k <= 5; k++ {
		code, h, body := p.get(t, "/")
		if code != 200 || body != "ok" {
			t.Errorf("request %d: %d %q, want 200 \"ok\"", k, code, body)
		}
		want := fmt.Sprintf(`"trial";r=%d;t=%d`, max(2-k, 0), thirtyDays)
		if got := h.Get("RateLimit"); got != want {
			t.Errorf("request %d: RateLimit %q, want %q", k, got, want)
		}
		if v := h.Get("Retry-After"); v != "" {
			t.Errorf("request %d: Retry-After %q on a served request", k, v)
		}
	}
}

// TestShadowBesideEnforced checks that a shadow rule's verdict does not
// affect an enforced rule in the same handler, nor take from it.
func TestShadowBesideEnforced(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		rule trial {
			limit 1 30d
			shadow
		}
		rule real {
			limit 3 30d
		}
	}
	respond "ok"
}
`)
	wantStatuses(t, "requests", p.statuses(t, 5, "/"), seq(3, 200, 2, 429))
}
