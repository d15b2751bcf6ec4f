package caddymodule

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// TestTiers: the tier scales the rule's limits; the key's counters are
// the same in every tier; no tier, or an unknown one, gets the rule's.
func TestTiers(t *testing.T) {
	rule := hourly("tiered", 2)
	rule.By = []string{"header X-User"}
	rule.Tiers = map[string][]string{"pro": {"5/1h"}, "banned": {"0/1h"}}
	rule.TierBy = "header X-Plan"
	h := testHandler(t, testApp(), rule)
	send := func(user, plan string, n int) int {
		return admitted(t, h, n, func() *http.Request {
			r := requestFrom("192.0.2.1", false, "X-User", user)
			if plan != "" {
				r.Header.Set("X-Plan", plan)
			}
			return r
		})
	}
	if got := send("ann", "pro", 8); got != 5 {
		t.Errorf("pro: %d admitted, want 5", got)
	}
	if got := send("bob", "", 4); got != 2 {
		t.Errorf("no tier: %d admitted, want 2", got)
	}
	if got := send("cid", "platinum", 4); got != 2 {
		t.Errorf("unknown tier: %d admitted, want 2", got)
	}
	if got := send("dan", "banned", 2); got != 0 {
		t.Errorf("banned: %d admitted, want 0", got)
	}
	// bob upgrades: 2 taken of pro's 5
	if got := send("bob", "pro", 8); got != 3 {
		t.Errorf("bob, now pro: %d admitted, want 3", got)
	}
	for _, bad := range []ruleconfig.Rule{
		{Name: "x", Limits: rule.Limits, Tiers: rule.Tiers},
		{Name: "x", Limits: rule.Limits, TierBy: "header X-Plan"},
		{Name: "x", Limits: rule.Limits, Tiers: rule.Tiers, TierBy: "nonsense"},
	} {
		if _, err := newRule(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestTiersYAML(t *testing.T) {
	rules, err := parseRulesFile([]byte(`rate_limit:
  - path: /api/*
    limit: 100
    window: 1m
    by: jwt sub
    tier_by: jwt plan
    tiers:
      free: 100/1m
      pro: [1000/1m]
`), "r.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := rulesJSON(t, rules); !strings.Contains(got, `"tiers":{"free":["100/1m"],"pro":["1000/1m"]},"tier_by":"jwt plan"`) {
		t.Errorf("tiers: %s", got)
	}
	_, err = parseRulesFile([]byte("rate_limit:\n  - limit: 5 1m\n    tier_by: header X\n    tiers: {pro: 50/1h}\n"), "r.yaml", "")
	if err == nil || !strings.Contains(err.Error(), "tier pro: 50/1h: the window must be the rule's, 1m") {
		t.Errorf("bad tier window: %v", err)
	}
}
