package caddymodule

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// exampleRules is caddyfile_examples/edgebyte_rules.yaml: the example of
// docs/DESIGN.md (EdgeByte YAML rules), unchanged, and a rule named login.
func exampleRules(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("../caddyfile_examples/edgebyte_rules.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func rulesJSON(t *testing.T, rules []ruleconfig.Rule) string {
	t.Helper()
	b, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRulesFileSeed(t *testing.T) {
	rules, err := parseRulesFile(exampleRules(t), "rules.yaml", "api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"api.example.com /api/v1/* by user_id","match":[{"path":["/api/v1/*"]}],"limits":[{"count":100,"window":60000000000}],"burst":20,"by":["user_id"]},` +
		`{"name":"api.example.com /api/public/* by ip","match":[{"path":["/api/public/*"]}],"limits":[{"count":1000,"window":60000000000}],"by":["ip"],"geo_multiplier":{"RU":1.5,"US":1,"default":0.5}},` +
		`{"name":"login","match":[{"path":["/login"]}],"limits":[{"count":5,"window":60000000000},{"count":20,"window":3600000000000}],"by":["ip"],"headers":"both"}]`
	if got := rulesJSON(t, rules); got != want {
		t.Errorf("example rules:\n got %s\nwant %s", got, want)
	}
}

func TestRulesFileEveryField(t *testing.T) {
	rules, err := parseRulesFile([]byte(`rate_limit:
  - name: everything
    path: [/a/*, /b]
    limit: ["20 1s", "10000 1d"]
    algorithm: token_bucket
    burst: 5
    by: [header X-API-Key, ip/24]
    on_missing_key: ip
    cost: 2
    shadow: true
    scope: node
    exempt: [10.0.0.0/8, 192.0.2.1]
    headers: both
    retry_jitter: 0.2
    max_keys: 5000
    max_overrides: 50
    problem_json: true
    log_key: false
  - name: leaky
    limit: "10 1s"
    algorithm: leaky_bucket
    max_delay: 500ms
    cost: "{http.request.header.X-Cost}"
    by: static everyone
    scope: cluster
  - name: daily
    limit: 1000
    window: day
    timezone: Europe/Berlin
  - name: quotas
    limit: ["10 1m", "300 month"]
    tiers: {pro: [100/1m, 3000/month]}
    tier_by: header X-Plan
  - name: networks
    limit: 100 1m
    by: asn
    asn_multiplier: {AS16509: 0.1, 14061: 0, default: 1}
`), "rules.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"everything","match":[{"path":["/a/*","/b"]}],"limits":[{"count":20,"window":1000000000},{"count":10000,"window":86400000000000}],"algorithm":"token_bucket","burst":5,"by":["header X-API-Key","ip/24"],"on_missing_key":"ip","cost":"2","shadow":true,"scope":"node","exempt":["10.0.0.0/8","192.0.2.1"],"headers":"both","retry_jitter":0.2,"max_keys":5000,"max_overrides":50,"problem_json":true},` +
		`{"name":"leaky","limits":[{"count":10,"window":1000000000}],"algorithm":"leaky_bucket","max_delay":500000000,"by":["static everyone"],"cost":"{http.request.header.X-Cost}","scope":"cluster"},` +
		`{"name":"daily","limits":[{"count":1000,"period":"day"}],"timezone":"Europe/Berlin"},` +
		`{"name":"quotas","limits":[{"count":10,"window":60000000000},{"count":300,"period":"month"}],"tiers":{"pro":["100/1m","3000/month"]},"tier_by":"header X-Plan"},` +
		`{"name":"networks","limits":[{"count":100,"window":60000000000}],"by":["asn"],"asn_multiplier":{"AS14061":0,"AS16509":0.1,"default":1}}]`
	if got := rulesJSON(t, rules); got != want {
		t.Errorf("rules:\n got %s\nwant %s", got, want)
	}
}

// TestRulesFileNames: derived names come from the prefix, the path and
// the key; a name given twice is an error.
func TestRulesFileNames(t *testing.T) {
	rules, err := parseRulesFile([]byte("rate_limit:\n  - limit: 5 1m\n  - path: /x\n    limit: 5 1m\n    by: [user_id, ip]\n  - limit: 7 1h\n"), "r.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if rules[0].Name != "by ip" || rules[1].Name != "/x by user_id+ip" || rules[2].Name != "by ip #2" {
		t.Errorf("names %q, %q, %q", rules[0].Name, rules[1].Name, rules[2].Name)
	}
}

func TestRulesFileErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"", "rules_file r.yaml: empty"},
		{"rate_limit: []\n", "rate_limit: want a list of rules, at r.yaml:1"},
		{"rate_limit:\n  - limit: 5 1m\nrate_limit:\n  - limit: 6 1m\n", "rate_limit given twice, at r.yaml:3"},
		{"rules:\n  - limit: 5 1m\n", `unknown field "rules": the file holds a rate_limit: list of rules, at r.yaml:1`},
		{"rate_limit:\n  - limit: 5 1m\n    colour: red\n", `unknown field "colour", at r.yaml:3`},
		{"rate_limit:\n  - path: /a\n    limit: 100\n    window: 1x\n", `limit window "1x": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at r.yaml:3`},
		{"rate_limit:\n  - path: /a\n    limit: 100\n", "limit 100: give its window, as window: 1m, or write limit: \"100 1m\", at r.yaml:3"},
		{"rate_limit:\n  - limit: 0 1m\n", "limit 0: the count must be a whole number from 1 to 4294967295, at r.yaml:2"},
		{"rate_limit:\n  - limit: 5 1m\n    window: 1m\n", "window goes with a whole-number limit (limit: 100, window: 1m), at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    algorithm: fancy\n", `unknown algorithm "fancy"`},
		{"rate_limit:\n  - limit: 5 1m\n    burst: -1\n", "burst -1: must be a whole number from 0 to 4294967295, at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    by: header\n", "by header: want a name, as in `by header NAME`, at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    geo_multiplier: {RUS: 2}\n", `geo_multiplier: argument 1 "RUS": not an ISO 3166-1 alpha-2 country code`},
		{"rate_limit:\n  - limit: 5 1m\n    asn_multiplier: {AS15169: 1, 15169: 2}\n", `asn_multiplier: argument 3 "15169": AS15169 given twice, at r.yaml:3`},
		{"rate_limit:\n  - limit: 5 1m\n    shadow: maybe\n", "shadow: want true or false, at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    scope: everywhere\n", `scope "everywhere": want cluster or node, at r.yaml:3`},
		{"rate_limit:\n  - limit: 5 1m\n    scope: [node, cluster]\n", "wrong argument count or unexpected line ending after 'node', at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    exempt: [10.0.0.0/33]\n", "at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    match: {path: /a}\n", "match cannot be in a rules file entry (use path:), at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    path: {a: b}\n", "path: want a path pattern (/api/*) or a list of them, at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    limit: 6 1m\n", "field limit given twice, at r.yaml:3"},
		{"rate_limit:\n  - limit: 5 1m\n    name: a\n  - limit: 6 1m\n    name: a\n", `rule "a" is defined twice in this file (first at line 2), at r.yaml:4`},
		{"rate_limit:\n  - just a string\n", "a rule is a mapping of fields"},
		{"rate_limit:\n  - path: /a\n", `rule "/a by ip" has no limit: add ` + "`limit <count> <window>`" + `, at r.yaml:2`},
		{"rate_limit:\n  - limit: 5 1m\n    max_delay: 1s\n", "max_delay applies to leaky_bucket only"},
		{"rate_limit:\n\t- bad indent\n", "rules_file r.yaml: yaml: line 2"},
		{"rate_limit:\n  - limit: 5 1m\n    cost: \"{\"\n", "cost: a value cannot be a lone brace, at r.yaml:3"},
	} {
		_, err := parseRulesFile([]byte(c.yaml), "r.yaml", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got error %v\nwant one containing %q", c.yaml, err, c.want)
		}
	}
}

// FuzzRulesFile: random YAML never panics, and what it accepts gives
// rules that newRule accepts.
func FuzzRulesFile(f *testing.F) {
	f.Add(exampleRules(f))
	f.Add([]byte("rate_limit:\n  - limit: [\"20 1s\", \"10000 1d\"]\n    by: [header X, ip/24]\n    geo_multiplier: {RU: 0}\n"))
	f.Add([]byte("a: &x [*x, *x]\nrate_limit: *x\n"))
	f.Add([]byte("rate_limit:\n  - {limit: 5 1m, shadow: true, exempt: ::1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := parseRulesFile(data, "fuzz.yaml", "site")
		if err != nil {
			return
		}
		for _, r := range rules {
			if _, err := newRule(r); err != nil {
				t.Fatalf("accepted rule %q fails newRule: %v", r.Name, err)
			}
		}
	})
}
