package ruleconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestParseTiers(t *testing.T) {
	hour := caddy.Duration(time.Hour)
	one := []Limit{{Count: 10, Window: hour}}
	two := []Limit{{Count: 10, Window: caddy.Duration(time.Second)}, {Count: 1000, Window: hour}}
	got, err := ParseTiers(map[string][]string{"free": {"10/1h"}, "pro": {"100/1h"}, "trial": {"5/1h"}, "banned": {"0/1h"}}, one)
	if err != nil || got["free"] != 1 || got["pro"] != 10 || got["trial"] != 0.5 || got["banned"] != 0 {
		t.Errorf("one limit: %v, %v", got, err)
	}
	got, err = ParseTiers(map[string][]string{"pro": {"30/1s", "3000/1h"}, "banned": {"0/1s", "0/1h"}}, two)
	if err != nil || got["pro"] != 3 || got["banned"] != 0 {
		t.Errorf("two limits: %v, %v", got, err)
	}
	for _, c := range []struct {
		tiers  map[string][]string
		limits []Limit
		want   string
	}{
		{map[string][]string{"pro": {"100/1m"}}, one, "tier pro: 100/1m: the window must be the rule's, 1h"},
		{map[string][]string{"pro": {"100"}}, one, `tier pro: "100": want COUNT/WINDOW`},
		{map[string][]string{"pro": {"x/1h"}}, one, "the count must be a whole number"},
		{map[string][]string{"pro": {"10/1s"}}, two, "gives 1 limits; the rule has 2"},
		{map[string][]string{"pro": {"30/1s", "1000/1h"}}, two, "scales the rule's limits by different factors"},
		{map[string][]string{"a b": {"10/1h"}}, one, "a tier name is one word"},
	} {
		if _, err := ParseTiers(c.tiers, c.limits); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.tiers, err, c.want)
		}
	}
}
