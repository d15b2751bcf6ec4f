package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

func TestAbuseJSONChecks(t *testing.T) {
	base := func() ruleconfig.Rule {
		return ruleconfig.Rule{Name: "r", Limits: []ruleconfig.Limit{{Count: 5, Window: 60e9}}}
	}
	for i, tc := range []struct {
		edit func(*ruleconfig.Rule)
		want string
	}{
		{func(r *ruleconfig.Rule) { r.BlockFor = []caddy.Duration{-1} }, "block_for -1ns: each duration must be above 0"},
		{func(r *ruleconfig.Rule) { r.BlockReset = 60e9 }, "block_reset without block_for"},
		{func(r *ruleconfig.Rule) { r.CountStatus = []string{"4x"} }, `count_status "4x"`},
		{func(r *ruleconfig.Rule) { r.CostHeader = "a b" }, `cost_header "a b": not a valid header name`},
		{func(r *ruleconfig.Rule) { r.Store = ruleconfig.StoreRedis; r.BlockFor = []caddy.Duration{1500} }, "must be a whole number of microseconds with store redis"},
		{func(r *ruleconfig.Rule) {
			r.Shadow = true
			r.BlockFor = []caddy.Duration{60e9}
			r.CountStatus = []string{"401"}
			r.CostHeader = "X-T"
		}, ""},
	} {
		r := base()
		tc.edit(&r)
		err := validateRule(r)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%d: got %v, want %q", i, err, tc.want)
		}
	}
}

func TestRulesFileAbuseFields(t *testing.T) {
	rules, err := parseRulesFile([]byte("rate_limit:\n  - path: /login\n    limit: 5 1m\n    block_for: [1m, 10m]\n    block_reset: 12h\n    count_status: [401, 403]\n  - limit: 100 1m\n    cost_header: X-Tokens\n"), "r.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(rules)
	for _, want := range []string{`"block_for":[60000000000,600000000000],"block_reset":43200000000000,"count_status":["401","403"]`, `"cost_header":"X-Tokens"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("got %s\nwant it to contain %s", got, want)
		}
	}
	_, err = parseRulesFile([]byte("rate_limit:\n  - limit: 5 1m\n    count_status: 4xx 700\n"), "r.yaml", "")
	if err == nil || !strings.Contains(err.Error(), `count_status "700": want a status code from 100 to 599 or a class from 1xx to 5xx, at r.yaml:3`) {
		t.Fatalf("got %v", err)
	}
}
