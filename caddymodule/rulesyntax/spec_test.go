package rulesyntax_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
)

// testChecks stand for caddymodule's: the key source "header X-Bad" and a
// rule named "unloadable" are refused.
var testChecks = rulesyntax.Checks{
	KeySource: func(word string) error {
		if word == "header X-Bad" {
			return errors.New("by header X-Bad: refused by the key source check")
		}
		return nil
	},
	Rule: func(r ruleconfig.Rule) error {
		if r.Name == "unloadable" {
			return errors.New("refused by the rule check")
		}
		return nil
	},
}

// readRule reads `rule r {` on line 1, body from line 2 and `}`, as the
// rate_limit directive reads a rule block, and finishes the rule.
func readRule(body string) (*rulesyntax.Spec, error) {
	d := caddyfile.NewTestDispenser("rule r {\n" + body + "\n}")
	d.Next()
	spec, err := rulesyntax.ParseRuleBlock(d, testChecks)
	if err != nil {
		return nil, err
	}
	return spec, spec.Finish()
}

// ruleJSON is the rule as JSON.
func ruleJSON(t *testing.T, spec *rulesyntax.Spec) string {
	t.Helper()
	out, err := json.Marshal(spec.Rule)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// accepted are forms of each subdirective that read, with the rule they
// make (as JSON); lim is the limit most cases need.
const lim = `"limits":[{"count":10,"window":60000000000}]`

var accepted = []struct {
	sub, body, want string
}{
	{"limit", " limit 10 1m", `{"name":"r",` + lim + `}`},
	{"limit", " limit 20 1s\n limit 10000 1d", `{"name":"r","limits":[{"count":20,"window":1000000000},{"count":10000,"window":86400000000000}]}`},
	{"limit", " limit 4294967295 1ms", `{"name":"r","limits":[{"count":4294967295,"window":1000000}]}`},
	{"limit", " limit 1 366d", `{"name":"r","limits":[{"count":1,"window":31622400000000000}]}`},
	{"limit", " limit 3 day", `{"name":"r","limits":[{"count":3,"period":"day"}]}`},
	{"limit", " limit 10 1m\n limit 100 week\n limit 300 month\n limit 1000 year\n limit 50 1d", `{"name":"r","limits":[{"count":10,"window":60000000000},{"count":100,"period":"week"},{"count":300,"period":"month"},{"count":1000,"period":"year"},{"count":50,"window":86400000000000}]}`},
	{"timezone", " limit 3 day\n timezone Europe/Berlin", `{"name":"r","limits":[{"count":3,"period":"day"}],"timezone":"Europe/Berlin"}`},
	{"timezone", " limit 3 month\n timezone UTC\n algorithm fixed_window", `{"name":"r","limits":[{"count":3,"period":"month"}],"algorithm":"fixed_window","timezone":"UTC"}`},
	{"timezone", " limit 3 week\n timezone America/Argentina/Buenos_Aires", `{"name":"r","limits":[{"count":3,"period":"week"}],"timezone":"America/Argentina/Buenos_Aires"}`},
	{"algorithm", " limit 10 1m\n algorithm sliding_window", `{"name":"r",` + lim + `,"algorithm":"sliding_window"}`},
	{"algorithm", " limit 10 1m\n algorithm fixed_window", `{"name":"r",` + lim + `,"algorithm":"fixed_window"}`},
	{"algorithm", " limit 10 1m\n algorithm sliding_log", `{"name":"r",` + lim + `,"algorithm":"sliding_log"}`},
	{"algorithm", " limit 10 1m\n algorithm token_bucket", `{"name":"r",` + lim + `,"algorithm":"token_bucket"}`},
	{"algorithm", " limit 10 1m\n algorithm leaky_bucket", `{"name":"r",` + lim + `,"algorithm":"leaky_bucket"}`},
	{"burst", " limit 10 1m\n burst 30", `{"name":"r",` + lim + `,"burst":30}`},
	{"burst", " limit 10 1m\n burst 0", `{"name":"r",` + lim + `}`},
	{"max_delay", " limit 10 1m\n algorithm leaky_bucket\n max_delay 2s", `{"name":"r",` + lim + `,"algorithm":"leaky_bucket","max_delay":2000000000}`},
	{"max_held", " limit 10 1m\n algorithm leaky_bucket\n max_held 5", `{"name":"r",` + lim + `,"algorithm":"leaky_bucket","max_held":5}`},
	{"max_concurrent", " max_concurrent 5", `{"name":"r","max_concurrent":5}`},
	{"max_concurrent", " limit 10 1m\n max_concurrent 5", `{"name":"r",` + lim + `,"max_concurrent":5}`},
	{"lease_timeout", " max_concurrent 5\n store redis\n lease_timeout 30s", `{"name":"r","store":"redis","max_concurrent":5,"lease_timeout":30000000000}`},
	{"by", " limit 10 1m\n by ip/24 user_id", `{"name":"r",` + lim + `,"by":["ip/24","user_id"]}`},
	{"by", " limit 10 1m\n by asn header User-Agent", `{"name":"r",` + lim + `,"by":["asn","header User-Agent"]}`},
	{"by", " limit 10 1m\n by header X-API-Key\n by query k cookie c jwt sub static all {http.request.host}", `{"name":"r",` + lim + `,"by":["header X-API-Key","query k","cookie c","jwt sub","static all","{http.request.host}"]}`},
	{"on_missing_key", " limit 10 1m\n on_missing_key deny", `{"name":"r",` + lim + `,"on_missing_key":"deny"}`},
	{"cost", " limit 10 1m\n cost 2", `{"name":"r",` + lim + `,"cost":"2"}`},
	{"cost", " limit 10 1m\n cost {http.request.header.X-Cost}", `{"name":"r",` + lim + `,"cost":"{http.request.header.X-Cost}"}`},
	{"cost_header", " limit 10 1m\n cost_header X-Units", `{"name":"r",` + lim + `,"cost_header":"X-Units"}`},
	{"count_status", " limit 10 1m\n count_status 401 4xx", `{"name":"r",` + lim + `,"count_status":["401","4xx"]}`},
	{"block_for", " limit 10 1m\n block_for 1m 10m 1h", `{"name":"r",` + lim + `,"block_for":[60000000000,600000000000,3600000000000]}`},
	{"block_reset", " limit 10 1m\n block_for 1m\n block_reset 1h", `{"name":"r",` + lim + `,"block_for":[60000000000],"block_reset":3600000000000}`},
	{"shadow", " limit 10 1m\n shadow", `{"name":"r",` + lim + `,"shadow":true}`},
	{"exempt", " limit 10 1m\n exempt 10.0.0.0/8 ::1\n exempt 192.0.2.7", `{"name":"r",` + lim + `,"exempt":["10.0.0.0/8","::1","192.0.2.7"]}`},
	{"headers", " limit 10 1m\n headers legacy", `{"name":"r",` + lim + `,"headers":"legacy"}`},
	{"retry_jitter", " limit 10 1m\n retry_jitter 0.2", `{"name":"r",` + lim + `,"retry_jitter":0.2}`},
	{"retry_jitter", " limit 10 1m\n retry_jitter 10", `{"name":"r",` + lim + `,"retry_jitter":10}`},
	{"max_keys", " limit 10 1m\n max_keys 5000", `{"name":"r",` + lim + `,"max_keys":5000}`},
	{"max_overrides", " limit 10 1m\n max_overrides 50", `{"name":"r",` + lim + `,"max_overrides":50}`},
	{"ipv4_prefix", " limit 10 1m\n ipv4_prefix 24", `{"name":"r",` + lim + `,"ipv4_prefix":24}`},
	{"ipv6_prefix", " limit 10 1m\n ipv6_prefix 128", `{"name":"r",` + lim + `,"ipv6_prefix":128}`},
	{"scope", " limit 10 1m\n scope node", `{"name":"r",` + lim + `,"scope":"node"}`},
	{"geo_multiplier", " limit 10 1m\n geo_multiplier RU 0.5 US 2 default 1", `{"name":"r",` + lim + `,"geo_multiplier":{"RU":0.5,"US":2,"default":1}}`},
	{"asn_multiplier", " limit 10 1m\n asn_multiplier AS15169 0.5 16509 0 default 2", `{"name":"r",` + lim + `,"asn_multiplier":{"AS15169":0.5,"AS16509":0,"default":2}}`},
	{"tier", " limit 10 1m\n tier free 5/1m\n tier pro 100/1m", `{"name":"r",` + lim + `,"tiers":{"free":["5/1m"],"pro":["100/1m"]}}`},
	{"tier_by", " limit 10 1m\n tier_by jwt plan", `{"name":"r",` + lim + `,"tier_by":"jwt plan"}`},
	{"key_hash", " limit 10 1m\n key_hash sha256", `{"name":"r",` + lim + `,"key_hash":"sha256"}`},
	{"problem_json", " limit 10 1m\n problem_json", `{"name":"r",` + lim + `,"problem_json":true}`},
	{"log_key", " limit 10 1m\n log_key", `{"name":"r",` + lim + `,"log_key":true}`},
	{"disable_metrics", " limit 10 1m\n disable_metrics", `{"name":"r",` + lim + `,"disable_metrics":true}`},
	{"store", " limit 10 1m\n store redis", `{"name":"r",` + lim + `,"store":"redis"}`},
	{"store", " limit 10 1m\n store local", `{"name":"r",` + lim + `,"store":"local"}`},
	{"on_store_error", " limit 10 1m\n store redis\n on_store_error fail_closed", `{"name":"r",` + lim + `,"store":"redis","on_store_error":"fail_closed"}`},
	{"match", " limit 10 1m\n match {\n  path /api/*\n }\n match {\n  method POST\n }", `{"name":"r","match":[{"path":["/api/*"]},{"method":["POST"]}],` + lim + `}`},
}

// refused are forms of each subdirective that do not, with the error,
// whose line is the one that caused it.
var refused = []struct {
	sub, body, want string
}{
	{"name", " name x\n limit 10 1m", "name in a rule block: the rule is named by `rule r`, at Testfile:2"},
	{"limit", " by ip", `rule "r" has no limit: add ` + "`limit <count> <window>`, at Testfile:1"},
	{"limit", " limit 10", "wrong argument count or unexpected line ending after '10', at Testfile:2"},
	{"limit", " limit 10 1m 1h", "wrong argument count or unexpected line ending after '1m', at Testfile:2"},
	{"limit", " limit 0 1m", "limit 0: the count must be a whole number from 1 to 4294967295, at Testfile:2"},
	{"limit", " limit 4294967296 1m", "limit 4294967296: the count must be a whole number from 1 to 4294967295, at Testfile:2"},
	{"limit", " limit ten 1m", "limit ten: the count must be a whole number from 1 to 4294967295, at Testfile:2"},
	{"limit", " limit 10 soon", `limit window "soon": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at Testfile:2`},
	{"limit", " limit 10 -1m", "limit window -1m: must not be negative, at Testfile:2"},
	{"limit", " limit 10 999us", "limit window 999us: must be between 1ms and 8784h0m0s, at Testfile:2"},
	{"limit", " limit 10 367d", "limit window 367d: must be between 1ms and 8784h0m0s, at Testfile:2"},
	{"limit", " limit 10 1m\n limit 20 60s", "limit 10 1m0s and limit 20 1m0s have the same window: keep the smaller, at Testfile:3"},
	{"limit", " limit 5 fortnight", `limit window "fortnight": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at Testfile:2`},
	{"limit", " limit 5 Day", `limit window "Day": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at Testfile:2`},
	{"limit", " limit 5 day\n limit 9 day", "limit 5 day and limit 9 day have the same window: keep the smaller, at Testfile:3"},
	{"limit", " limit 5 day\n algorithm sliding_window", `rule "r": a calendar limit (day, week, month, year) is a fixed window: algorithm fixed_window, or none, not sliding_window, at Testfile:3`},
	{"limit", " limit 5 month\n algorithm token_bucket", `rule "r": a calendar limit (day, week, month, year) is a fixed window: algorithm fixed_window, or none, not token_bucket, at Testfile:3`},
	{"timezone", " limit 5 day\n timezone Mars/Base", `timezone "Mars/Base": not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York), at Testfile:3`},
	{"timezone", " limit 5 day\n timezone Local", `timezone "Local": not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York), at Testfile:3`},
	{"timezone", " limit 5 day\n timezone", "wrong argument count or unexpected line ending after 'timezone', at Testfile:3"},
	{"timezone", " limit 5 day\n timezone UTC UTC", "wrong argument count or unexpected line ending after 'UTC', at Testfile:3"},
	{"timezone", " limit 5 1d\n timezone Europe/Berlin", `rule "r": timezone applies to calendar limits only (limit <count> day, week, month or year), at Testfile:3`},
	{"timezone", " limit 5 day\n timezone UTC\n timezone UTC", "timezone already given on line 3, at Testfile:4"},
	{"algorithm", " limit 10 1m\n algorithm gcra", `unknown algorithm "gcra": want sliding_window, fixed_window, sliding_log, token_bucket or leaky_bucket, at Testfile:3`},
	{"algorithm", " limit 10 1m\n algorithm", "wrong argument count or unexpected line ending after 'algorithm', at Testfile:3"},
	{"algorithm", " limit 10 1m\n algorithm fixed_window\n algorithm sliding_log", "algorithm already given on line 3, at Testfile:4"},
	{"burst", " limit 10 1m\n burst -1", "burst -1: must be a whole number from 0 to 4294967295, at Testfile:3"},
	{"burst", " limit 10 1m\n burst lots", "burst lots: must be a whole number from 0 to 4294967295, at Testfile:3"},
	{"burst", " limit 10 1m\n burst 1\n burst 2", "burst already given on line 3, at Testfile:4"},
	{"max_delay", " limit 10 1m\n algorithm leaky_bucket\n max_delay 0s", "max_delay 0s: must be positive, at Testfile:4"},
	{"max_delay", " limit 10 1m\n algorithm leaky_bucket\n max_delay soon", `max_delay "soon": not a duration (such as 500ms, 1m or 1d), at Testfile:4`},
	{"max_delay", " limit 10 1m\n max_delay 1s", `rule "r": max_delay applies to leaky_bucket only, not sliding_window, at Testfile:3`},
	{"max_delay", " limit 10 1m\n max_delay 1s\n algorithm token_bucket", `rule "r": max_delay applies to leaky_bucket only, not token_bucket, at Testfile:3`},
	{"max_held", " limit 10 1m\n algorithm leaky_bucket\n max_held 0", "max_held 0: must be a whole number of at least 1, at Testfile:4"},
	{"max_held", " limit 10 1m\n max_held 5", `rule "r": max_held applies to leaky_bucket only (no other algorithm holds requests), at Testfile:3`},
	{"max_concurrent", " max_concurrent 0", "max_concurrent 0: must be a whole number of at least 1, at Testfile:2"},
	{"max_concurrent", " max_concurrent some", "max_concurrent some: must be a whole number of at least 1, at Testfile:2"},
	{"max_concurrent", " max_concurrent 4294967296", `rule "r": max_concurrent 4294967296: must be a whole number from 1 to 4294967295, at Testfile:2`},
	{"max_concurrent", " max_concurrent 5\n cost 2", `rule "r": cost needs a limit line: a rule with max_concurrent alone counts requests in flight, one each, at Testfile:2`},
	{"lease_timeout", " limit 10 1m\n lease_timeout 30s", `rule "r": lease_timeout applies to max_concurrent with store redis only, at Testfile:1`},
	{"lease_timeout", " max_concurrent 5\n store redis\n lease_timeout 0s", "lease_timeout 0s: must be positive, at Testfile:4"},
	{"lease_timeout", " max_concurrent 5\n store redis\n lease_timeout 2ms", `rule "r": lease_timeout 2ms: must be whole milliseconds, at least 3ms, at Testfile:2`},
	{"by", " limit 10 1m\n by", "wrong argument count or unexpected line ending after 'by', at Testfile:3"},
	{"by", " limit 10 1m\n by header", "by header: want a name, as in `by header NAME`, at Testfile:3"},
	{"by", " limit 10 1m\n by ip header X-Bad", "by header X-Bad: refused by the key source check, at Testfile:3"},
	{"on_missing_key", " limit 10 1m\n on_missing_key allow", `on_missing_key "allow": want skip, ip or deny, at Testfile:3`},
	{"on_missing_key", " limit 10 1m\n on_missing_key skip deny", "wrong argument count or unexpected line ending after 'skip', at Testfile:3"},
	{"cost", " limit 10 1m\n cost cheap", `cost "cheap": want a whole number ≥ 1 or a {placeholder}, at Testfile:3`},
	{"cost", " limit 10 1m\n cost 0", `cost "0": want a whole number ≥ 1 or a {placeholder}, at Testfile:3`},
	{"cost", " limit 10 1m\n cost 11", `rule "r": cost 11 is more than limit 10 1m0s allows: every request would be denied, at Testfile:3`},
	{"cost", " limit 10 1m\n burst 3\n cost 4", `rule "r": cost 4 is more than burst 3 allows: every request would be denied, at Testfile:4`},
	{"cost_header", " limit 10 1m\n cost_header X:Units", `cost_header "X:Units": not a valid header name, at Testfile:3`},
	{"cost_header", " limit 10 1m\n algorithm leaky_bucket\n cost_header X-Units", `rule "r": cost_header takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket, at Testfile:4`},
	{"count_status", " limit 10 1m\n count_status", "count_status: want at least one status code (401) or class (4xx), at Testfile:3"},
	{"count_status", " limit 10 1m\n count_status 401 6xx", `count_status "6xx": want a status code from 100 to 599 or a class from 1xx to 5xx, at Testfile:3`},
	{"count_status", " limit 10 1m\n algorithm leaky_bucket\n count_status 401", `rule "r": count_status takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket, at Testfile:4`},
	{"block_for", " limit 10 1m\n block_for", "block_for: want one or more durations, as in `block_for 1m 10m 1h`, at Testfile:3"},
	{"block_for", " limit 10 1m\n block_for 1m 0s", "block_for 0s: each duration must be above 0 and at most 8784h0m0s, at Testfile:3"},
	{"block_for", " limit 10 1m\n block_for 1m forever", `block_for "forever": not a duration (such as 500ms, 1m or 1d), at Testfile:3`},
	{"block_for", " limit 10 1m\n block_for 1m\n block_for 2m", "block_for already given on line 3, at Testfile:4"},
	{"block_reset", " limit 10 1m\n block_for 1m\n block_reset 367d", "block_reset 8808h0m0s: must be at most 8784h0m0s, at Testfile:4"},
	{"block_reset", " limit 10 1m\n block_for 1m\n block_reset 0s", "block_reset 0s: must be positive, at Testfile:4"},
	{"block_reset", " limit 10 1m\n block_reset 1h", `rule "r": block_reset without block_for: there are no blocks to forget, at Testfile:3`},
	{"shadow", " limit 10 1m\n shadow yes", "wrong argument count or unexpected line ending after 'yes', at Testfile:3"},
	{"shadow", " limit 10 1m\n shadow\n shadow", "shadow already given on line 3, at Testfile:4"},
	{"exempt", " limit 10 1m\n exempt", "wrong argument count or unexpected line ending after 'exempt', at Testfile:3"},
	{"exempt", " limit 10 1m\n exempt 10.0.0.0/8 localhost", `exempt "localhost": not an IP address or CIDR, at Testfile:3`},
	{"headers", " limit 10 1m\n headers draft", `headers "draft": want ietf, legacy, both or off, at Testfile:3`},
	{"retry_jitter", " limit 10 1m\n retry_jitter lots", "retry_jitter lots: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%), at Testfile:3"},
	{"retry_jitter", " limit 10 1m\n retry_jitter 10.5", "retry_jitter 10.5: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%), at Testfile:3"},
	{"retry_jitter", " limit 10 1m\n retry_jitter NaN", "retry_jitter NaN: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%), at Testfile:3"},
	{"max_keys", " limit 10 1m\n max_keys 0", "max_keys 0: must be a whole number of at least 1, at Testfile:3"},
	{"max_overrides", " limit 10 1m\n max_overrides -1", "max_overrides -1: must be a whole number of at least 1, at Testfile:3"},
	{"ipv4_prefix", " limit 10 1m\n ipv4_prefix 33", "ipv4_prefix 33: must be a whole number from 1 to 32, at Testfile:3"},
	{"ipv4_prefix", " limit 10 1m\n ipv4_prefix 0", "ipv4_prefix 0: must be a whole number from 1 to 32, at Testfile:3"},
	{"ipv6_prefix", " limit 10 1m\n ipv6_prefix 129", "ipv6_prefix 129: must be a whole number from 1 to 128, at Testfile:3"},
	{"scope", " limit 10 1m\n scope global", `scope "global": want cluster or node, at Testfile:3`},
	{"scope", " limit 10 1m\n scope node\n store redis", `rule "r": store redis and scope node: choose one (a limit in Redis holds for every node that uses it), at Testfile:4`},
	{"geo_multiplier", " limit 10 1m\n geo_multiplier RU", `geo_multiplier: argument 1 "RU": no factor follows, at Testfile:3`},
	{"geo_multiplier", " limit 10 1m\n geo_multiplier RU 1 RU 2", `geo_multiplier: argument 3 "RU": country RU given twice, at Testfile:3`},
	{"asn_multiplier", " limit 10 1m\n asn_multiplier", `asn_multiplier: expected AS numbers and factors, such as: AS15169 0.5 default 1, at Testfile:3`},
	{"asn_multiplier", " limit 10 1m\n asn_multiplier AS15169 1 15169 2", `asn_multiplier: argument 3 "15169": AS15169 given twice, at Testfile:3`},
	{"asn_multiplier", " limit 10 1m\n asn_multiplier US 1", `asn_multiplier: argument 1 "US": not an AS number (1 to 4294967295, such as AS15169 or 15169) or "default", at Testfile:3`},
	{"asn_multiplier", " limit 10 1m\n asn_multiplier AS15169 -0.5", `asn_multiplier: argument 2 "-0.5" (factor for AS15169): factor is negative, at Testfile:3`},
	{"tier", " limit 10 1m\n tier pro", "tier: want a name and its limits, as in `tier pro 1000/1m`, at Testfile:3"},
	{"tier", " limit 10 1m\n tier pro 1000", `tier pro: "1000": want COUNT/WINDOW, such as 1000/1m, at Testfile:3`},
	{"tier", " limit 10 1m\n tier pro 100/1m\n tier pro 200/1m", "tier pro given twice, at Testfile:4"},
	{"tier_by", " limit 10 1m\n tier_by jwt plan header X-Plan", "tier_by: want one source, such as jwt plan or header X-Plan, at Testfile:3"},
	{"tier_by", " limit 10 1m\n tier_by header", "by header: want a name, as in `by header NAME`, at Testfile:3"},
	{"key_hash", " limit 10 1m\n key_hash md5", `key_hash "md5": want sha256, at Testfile:3`},
	{"problem_json", " limit 10 1m\n problem_json on", "wrong argument count or unexpected line ending after 'on', at Testfile:3"},
	{"log_key", " limit 10 1m\n log_key on", "wrong argument count or unexpected line ending after 'on', at Testfile:3"},
	{"disable_metrics", " limit 10 1m\n disable_metrics yes", "wrong argument count or unexpected line ending after 'yes', at Testfile:3"},
	{"store", " limit 10 1m\n store memcached", `store "memcached": want local or redis, at Testfile:3`},
	{"store", " limit 10 1m\n store redis\n scope cluster", `rule "r": store redis and scope cluster: choose one (Redis holds one exact limit for every node that uses it; scope cluster shares the limit by gossip), at Testfile:3`},
	{"store", " limit 10 1000500ns\n store redis", `rule "r": limit window 1.0005ms: must be a whole number of microseconds with store redis, at Testfile:3`},
	{"on_store_error", " limit 10 1m\n store redis\n on_store_error retry", `on_store_error "retry": want local, fail_open or fail_closed, at Testfile:4`},
	{"on_store_error", " limit 10 1m\n on_store_error fail_open", `rule "r": on_store_error applies to store redis only, at Testfile:3`},
	// Caddy's matcher parser reports at the end of the match block
	{"match", " limit 10 1m\n match {\n  nosuchmatcher x\n }", "getting matcher module 'nosuchmatcher': module not registered: http.matchers.nosuchmatcher, at Testfile:5"},
}

func TestSubdirectivesAccepted(t *testing.T) {
	for i, tc := range accepted {
		spec, err := readRule(tc.body)
		if err != nil {
			t.Errorf("Test %d (%s): %v", i, tc.sub, err)
			continue
		}
		if got := ruleJSON(t, spec); got != tc.want {
			t.Errorf("Test %d (%s): got\n%s\nwant\n%s", i, tc.sub, got, tc.want)
		}
	}
}

func TestSubdirectivesRefused(t *testing.T) {
	for i, tc := range refused {
		_, err := readRule(tc.body)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Test %d (%s): got error %v, want %q", i, tc.sub, err, tc.want)
		}
	}
}

// TestEverySubdirectiveTested keeps the tables whole: every subdirective
// rulesyntax knows has a form accepted (name: at the top of a block, see
// TestTopOfBlock) and a form refused, and the tables name no other.
func TestEverySubdirectiveTested(t *testing.T) {
	known := rulesyntax.Subdirectives()
	subs := func(cases []struct{ sub, body, want string }) []string {
		var out []string
		for _, tc := range cases {
			if !slices.Contains(out, tc.sub) {
				out = append(out, tc.sub)
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := subs(accepted), slices.DeleteFunc(slices.Clone(known), func(s string) bool { return s == "name" }); !slices.Equal(got, want) {
		t.Errorf("accepted forms of %v, want of %v", got, want)
	}
	if got := subs(refused); !slices.Equal(got, known) {
		t.Errorf("refused forms of %v, want of %v", got, known)
	}
}

// TestRuleBlock checks what a rule block refuses of itself: its name's
// form, the subdirectives that belong to the top of rate_limit, one
// unknown, and what the rule check refuses, at the rule's first line.
func TestRuleBlock(t *testing.T) {
	for i, tc := range []struct{ src, want string }{
		{"rule {\n limit 10 1m\n}", "wrong argument count or unexpected line ending after 'rule', at Testfile:1"},
		{"rule a b {\n limit 10 1m\n}", "wrong argument count or unexpected line ending after 'b', at Testfile:1"},
		{"rule a {\n limit 10 1m\n rule b {\n }\n}", "rule cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n zone z {\n }\n}", "zone cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n jitter 0.1\n}", "jitter cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n sweep_interval 1m\n}", "sweep_interval cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n distributed\n}", "distributed cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n storage file\n}", "storage cannot be inside a rule block, at Testfile:3"},
		{"rule a {\n limit 10 1m\n rules_file r.yaml\n}", `unrecognized subdirective "rules_file", at Testfile:3`},
		{"rule a {\n limit 10 1m\n rate 10\n}", `unrecognized subdirective "rate", at Testfile:3`},
		{"rule unloadable {\n limit 10 1m\n}", `rule "unloadable": refused by the rule check, at Testfile:1`},
	} {
		d := caddyfile.NewTestDispenser(tc.src)
		d.Next()
		spec, err := rulesyntax.ParseRuleBlock(d, testChecks)
		if err == nil {
			err = spec.Finish()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: got error %v, want %q", i, err, tc.want)
		}
	}
}

// readTop reads a rate_limit block's top as package adapt does: each
// subdirective through Spec.Parse, jitter as retry_jitter.
func readTop(src string) (*rulesyntax.Spec, error) {
	d := caddyfile.NewTestDispenser(src)
	d.Next()
	top := rulesyntax.NewSpec(d.Token(), testChecks)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		if d.Val() == "jitter" {
			err = top.ParseAs(d, "retry_jitter")
		} else {
			err = top.Parse(d)
		}
		if err != nil {
			return nil, err
		}
	}
	return top, nil
}

// TestTopOfBlock checks name, which only the top of a block gives, the
// jitter alias sharing retry_jitter's once, and what a rule block
// inherits from the top (each inherited subdirective keeps the top's
// line for errors).
func TestTopOfBlock(t *testing.T) {
	top, err := readTop("rate_limit {\n name api\n limit 10 1m\n by user_id\n jitter 0.5\n block_for 1m\n}")
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := ruleJSON(t, top), `{"name":"api",`+lim+`,"by":["user_id"],"retry_jitter":0.5,"block_for":[60000000000]}`; got != want {
		t.Errorf("top: got %s, want %s", got, want)
	}

	for i, tc := range []struct{ src, want string }{
		{"rate_limit {\n name\n}", "wrong argument count or unexpected line ending after 'name', at Testfile:2"},
		{"rate_limit {\n name a\n name b\n}", "name already given on line 2, at Testfile:3"},
		{"rate_limit {\n retry_jitter 0.1\n jitter 0.2\n}", "retry_jitter already given on line 2, at Testfile:3"},
		{"rate_limit {\n jitter 0.1\n retry_jitter 0.2\n}", "jitter already given on line 2, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n zone z\n}", `unrecognized subdirective "zone", at Testfile:3`},
	} {
		if _, err := readTop(tc.src); err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: got error %v, want %q", i, err, tc.want)
		}
	}

	// a rule block inherits what it does not give; its own limit lines
	// replace the top's
	top, err = readTop("rate_limit {\n limit 10 1m\n by user_id\n max_delay 1s\n}")
	if err != nil {
		t.Fatal(err)
	}
	d := caddyfile.NewTestDispenser("rule a {\n limit 5 1s\n algorithm token_bucket\n}")
	d.Next()
	rule, err := rulesyntax.ParseRuleBlock(d, testChecks)
	if err != nil {
		t.Fatal(err)
	}
	rule.Inherit(top)
	if got, want := ruleJSON(t, rule), `{"name":"a","limits":[{"count":5,"window":1000000000}],"algorithm":"token_bucket","max_delay":1000000000,"by":["user_id"]}`; got != want {
		t.Errorf("inherited: got %s, want %s", got, want)
	}
	// the top's max_delay is refused at the top's line
	if err, want := rule.Finish(), `rule "a": max_delay applies to leaky_bucket only, not token_bucket, at Testfile:4`; err == nil || err.Error() != want {
		t.Errorf("inherited max_delay: got error %v, want %q", err, want)
	}

	// the top's timezone goes to the rules with a calendar limit only
	top, err = readTop("rate_limit {\n limit 10000 day\n timezone Europe/Berlin\n}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ block, want string }{
		{"rule a {\n limit 5 1m\n}", `{"name":"a","limits":[{"count":5,"window":60000000000}]}`},
		{"rule b {\n limit 5 1m\n limit 100 month\n}", `{"name":"b","limits":[{"count":5,"window":60000000000},{"count":100,"period":"month"}],"timezone":"Europe/Berlin"}`},
		{"rule c {\n by user_id\n}", `{"name":"c","limits":[{"count":10000,"period":"day"}],"timezone":"Europe/Berlin","by":["user_id"]}`},
		{"rule d {\n limit 5 week\n timezone UTC\n}", `{"name":"d","limits":[{"count":5,"period":"week"}],"timezone":"UTC"}`},
	} {
		d := caddyfile.NewTestDispenser(tc.block)
		d.Next()
		rule, err := rulesyntax.ParseRuleBlock(d, testChecks)
		if err != nil {
			t.Fatal(err)
		}
		rule.Inherit(top)
		if err := rule.Finish(); err != nil {
			t.Errorf("%s: %v", tc.block, err)
		}
		if got := ruleJSON(t, rule); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.block, got, tc.want)
		}
	}
}

// TestBlockRepeats checks the block reader alone: a block's name
// prefixes the error, a repeatable subdirective repeats, and one given by
// a token without a line (an earlier global option) names no line.
func TestBlockRepeats(t *testing.T) {
	read := func(b rulesyntax.Block, src string) ([]string, error) {
		d := caddyfile.NewTestDispenser(src)
		d.Next()
		var subs []string
		err := b.Read(d, func(sub string) error {
			subs = append(subs, sub+" "+strings.Join(d.RemainingArgs(), " "))
			return nil
		})
		return subs, err
	}
	subs, err := read(rulesyntax.NewBlock("cluster", rulesyntax.Repeatable("join")), "cluster {\n join a:1\n bind b:2\n join c:3\n}")
	if err != nil || !slices.Equal(subs, []string{"join a:1", "bind b:2", "join c:3"}) {
		t.Errorf("got %q, %v; want the three lines in order", subs, err)
	}
	for i, tc := range []struct {
		block rulesyntax.Block
		src   string
		want  string
	}{
		{rulesyntax.NewBlock("cluster", rulesyntax.Repeatable("join")), "cluster {\n bind a:1\n join b:2\n bind c:3\n}", "cluster: bind already given on line 2, at Testfile:4"},
		{rulesyntax.NewBlock("", nil), "x {\n a 1\n a 2\n}", "a already given on line 2, at Testfile:3"},
		{rulesyntax.NewBlock("", rulesyntax.Once("store")), "x {\n a 1\n a 2\n store\n store\n}", "store already given on line 4, at Testfile:5"},
		{rulesyntax.Block{Set: map[string]caddyfile.Token{"cluster": {Text: "cluster"}}}, "x {\n cluster\n}", "cluster already given, at Testfile:2"},
	} {
		if _, err := read(tc.block, tc.src); err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: got error %v, want %q", i, err, tc.want)
		}
	}
}
