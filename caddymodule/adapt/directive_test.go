package adapt

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
)

// parseTest parses input as the rate_limit block of site with matcher.
func parseTest(input, site, matcher string, derived map[string]bool) (*caddymodule.Handler, error) {
	p := &blockParser{names: rulesyntax.Namer{Site: site, Matcher: matcher, Taken: derived}}
	return p.parse(caddyfile.NewTestDispenser(input))
}

func TestParseCaddyfile(t *testing.T) {
	for i, tc := range []struct {
		input   string
		site    string
		matcher string
		want    string // the handler as JSON
	}{
		{
			input: `rate_limit {
				limit 100 1m
			}`,
			site: "example.com",
			want: `{"rules":[{"name":"example.com by ip","limits":[{"count":100,"window":60000000000}]}]}`,
		},
		{
			input: `rate_limit {
				name api
				limit 20 1s
				limit 10000 1d
				algorithm token_bucket
				burst 30
				by header X-API-Key user_id
				by ip/24/64
				on_missing_key deny
				cost {http.request.header.X-Cost}
				shadow
				scope node
				exempt 10.0.0.0/8 ::1
				exempt 192.168.1.1
				headers both
				retry_jitter 0.25
				max_keys 5000
				problem_json
				log_key
			}`,
			want: `{"rules":[{"name":"api","limits":[{"count":20,"window":1000000000},{"count":10000,"window":86400000000000}],` +
				`"algorithm":"token_bucket","burst":30,"by":["header X-API-Key","user_id","ip/24/64"],"on_missing_key":"deny",` +
				`"cost":"{http.request.header.X-Cost}","shadow":true,"scope":"node","exempt":["10.0.0.0/8","::1","192.168.1.1"],"headers":"both",` +
				`"retry_jitter":0.25,"max_keys":5000,"problem_json":true,"log_key":true}]}`,
		},
		{
			input: `rate_limit {
				limit 5 1s
				algorithm leaky_bucket
				burst 10
				max_delay 500ms
				by query q cookie session {http.request.host}
				cost 3
			}`,
			matcher: "/api/*",
			want: `{"rules":[{"name":"/api/* by query q+cookie session+{http.request.host}","limits":[{"count":5,"window":1000000000}],` +
				`"algorithm":"leaky_bucket","burst":10,"max_delay":500000000,"by":["query q","cookie session","{http.request.host}"],"cost":"3"}]}`,
		},
		{
			// rule blocks inherit the defaults at the top; their own values,
			// and their own limit lines, replace them
			input: `rate_limit {
				limit 100 1m
				headers legacy
				by user_id
				rule reads {
					match {
						method GET
					}
				}
				rule writes {
					limit 10 1m
					limit 100 1h
					headers off
				}
				log_key
			}`,
			site: "a.example,b.example",
			want: `{"rules":[` +
				`{"name":"reads","match":[{"method":["GET"]}],"limits":[{"count":100,"window":60000000000}],"by":["user_id"],"headers":"legacy","log_key":true},` +
				`{"name":"writes","limits":[{"count":10,"window":60000000000},{"count":100,"window":3600000000000}],"by":["user_id"],"headers":"off","log_key":true}]}`,
		},
		{
			// scope is inherited like the others, and a rule's own replaces it
			input: `rate_limit {
				limit 10 1s
				scope node
				rule a {
				}
				rule b {
					scope cluster
				}
			}`,
			want: `{"rules":[` +
				`{"name":"a","limits":[{"count":10,"window":1000000000}],"scope":"node"},` +
				`{"name":"b","limits":[{"count":10,"window":1000000000}],"scope":"cluster"}]}`,
		},
		{
			// caddy-ratelimit's syntax, from its README
			input: `rate_limit {
				distributed
				zone static_example {
					match {
						method GET
					}
					key    static
					events 100
					window 1m
				}
				zone dynamic_example {
					key    {remote_host}
					events 2
					window 5s
				}
				log_key
				jitter 0.2
				sweep_interval 2m
				storage file_system {
					root /tmp/x
				}
			}`,
			want: `{"rules":[` +
				`{"name":"static_example","match":[{"method":["GET"]}],"limits":[{"count":100,"window":60000000000}],"algorithm":"sliding_log","by":["static static"],"retry_jitter":0.2,"log_key":true},` +
				`{"name":"dynamic_example","limits":[{"count":2,"window":5000000000}],"algorithm":"sliding_log","by":["{remote_host}"],"on_missing_key":"ip","retry_jitter":0.2,"log_key":true}` +
				`],"sweep_interval":120000000000}`,
		},
		{
			// zones, a zone without a key, prefixes, and a rule of the top
			// mixed in one block
			input: `rate_limit {
				limit 1000 1h
				zone subnets {
					key {client_ip}
					ipv4_prefix 24
					ipv6_prefix 48
					events 50
					window 10s
				}
				zone everyone {
					events 10000
					window 1m
				}
				zone paths {
					key "{remote_host} {path}"
					events 5
					window 1s
				}
			}`,
			site:    "example.com",
			matcher: "*",
			want: `{"rules":[` +
				`{"name":"example.com by ip","limits":[{"count":1000,"window":3600000000000}]},` +
				`{"name":"subnets","limits":[{"count":50,"window":10000000000}],"algorithm":"sliding_log","by":["{client_ip}"],"on_missing_key":"ip","ipv4_prefix":24,"ipv6_prefix":48},` +
				`{"name":"everyone","limits":[{"count":10000,"window":60000000000}],"algorithm":"sliding_log","by":["static global"]},` +
				`{"name":"paths","limits":[{"count":5,"window":1000000000}],"algorithm":"sliding_log","by":["{remote_host} {path}"],"on_missing_key":"ip"}]}`,
		},
		{
			// a derived name has no '"' or '\'
			input: `rate_limit {
				limit 1 1s
				by "{http.request.header.X-\"Quoted\"}"
			}`,
			site: `"odd"\site`,
			want: `{"rules":[{"name":"oddsite by {http.request.header.X-Quoted}","limits":[{"count":1,"window":1000000000}],"by":["{http.request.header.X-\"Quoted\"}"]}]}`,
		},
	} {
		h, err := parseTest(tc.input, tc.site, tc.matcher, nil)
		if err != nil {
			t.Errorf("Test %d: unexpected error: %v", i, err)
			continue
		}
		got, err := json.Marshal(h)
		if err != nil {
			t.Errorf("Test %d: marshaling: %v", i, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Test %d: got\n%s\nwant\n%s", i, got, tc.want)
		}
	}
}

func TestParseCaddyfileErrors(t *testing.T) {
	for i, tc := range []struct {
		input string
		want  string // a substring of the error, with its line
	}{
		{"rate_limit {\n limit 10 1m\n frobnicate\n}", `unrecognized subdirective "frobnicate", at Testfile:3`},
		{"rate_limit extra {\n limit 10 1m\n}", `unexpected argument "extra": a matcher is *, /path or @name, and rules go in the block, at Testfile:1`},
		{"rate_limit {\n limit 10\n}", "wrong argument count or unexpected line ending after '10', at Testfile:2"},
		{"rate_limit {\n limit 10 1m 2\n}", "wrong argument count or unexpected line ending after '1m', at Testfile:2"},
		{"rate_limit {\n limit 10 1x\n}", `limit window "1x": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at Testfile:2`},
		{"rate_limit {\n limit 10 -1m\n}", "limit window -1m: must not be negative, at Testfile:2"},
		{"rate_limit {\n limit 0 1m\n}", "limit 0: the count must be a whole number from 1 to 4294967295, at Testfile:2"},
		{"rate_limit {\n limit ten 1m\n}", "limit ten: the count must be a whole number"},
		{"rate_limit {\n limit 10 0s\n}", "limit window 0s: must be between 1ms and 8784h0m0s, at Testfile:2"},
		{"rate_limit {\n limit 10 1m\n burst -1\n}", "burst -1: must be a whole number from 0 to 4294967295, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n algorithm gcra\n}", `unknown algorithm "gcra": want sliding_window, fixed_window, sliding_log, token_bucket or leaky_bucket, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n max_delay 1s\n}", `max_delay applies to leaky_bucket only, not sliding_window, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n max_delay 1s\n algorithm token_bucket\n}", `max_delay applies to leaky_bucket only, not token_bucket, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n max_delay soon\n}", `max_delay "soon": not a duration (such as 500ms, 1m or 1d), at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n by ip/33\n}", `by ip/33: IPv4 prefix length "33" must be 0 to 32, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n by ip/24/129\n}", `IPv6 prefix length "129" must be 0 to 128, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n by header\n}", "by header: want a name, as in `by header NAME`, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n by nobody\n}", `by "nobody": want ip`},
		{"rate_limit {\n limit 10 1m\n by jwt\n}", "by jwt: want a name, as in `by jwt NAME`"},
		{"rate_limit {\n limit 10 1m\n by\n}", "wrong argument count"},
		{"rate_limit {\n limit 10 1m\n exempt 10.0.0.0/33\n}", `exempt "10.0.0.0/33"`},
		{"rate_limit {\n limit 10 1m\n exempt localhost\n}", `exempt "localhost": not an IP address or CIDR, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n headers draft\n}", `headers "draft": want ietf, legacy, both or off, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n on_missing_key allow\n}", `on_missing_key "allow": want skip, ip or deny, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n retry_jitter lots\n}", "retry_jitter lots: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%), at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n retry_jitter NaN\n}", "retry_jitter NaN: want a fraction"},
		{"rate_limit {\n limit 10 1m\n max_keys many\n}", "max_keys many: must be a whole number of at least 1, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n cost cheap\n}", `cost "cheap": want a whole number ≥ 1 or a {placeholder}, at Testfile:3`},
		// the footguns of a bypass hunt: each a load error at its line
		{"rate_limit {\n limit 10 1m\n cost 0\n}", `cost "0": want a whole number ≥ 1 or a {placeholder}, at Testfile:3`},
		{"rate_limit {\n limit 10 1s\n limit 10000 1d\n cost 20\n}", `cost 20 is more than limit 10 1s allows: every request would be denied, at Testfile:4`},
		{"rate_limit {\n limit 100 1m\n burst 5\n cost 6\n}", `cost 6 is more than burst 5 allows: every request would be denied, at Testfile:4`},
		{"rate_limit {\n limit 10 1m\n limit 20 60s\n}", `limit 10 1m0s and limit 20 1m0s have the same window: keep the smaller, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n retry_jitter -0.5\n}", `retry_jitter -0.5: want a fraction of the wait from 0 to 10`},
		{"rate_limit {\n limit 10 1m\n max_held 10\n}", `max_held applies to leaky_bucket only (no other algorithm holds requests), at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n algorithm leaky_bucket\n max_held 0\n}", `max_held 0: must be a whole number of at least 1, at Testfile:4`},
		{"rate_limit {\n limit 10 1m\n shadow yes\n}", "wrong argument count or unexpected line ending after 'yes', at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n algorithm fixed_window\n algorithm sliding_log\n}", "algorithm already given on line 3, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n scope global\n}", `scope "global": want cluster or node, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n scope\n}", "wrong argument count or unexpected line ending after 'scope', at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n scope node cluster\n}", "wrong argument count or unexpected line ending after 'node', at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n scope node\n scope node\n}", "scope already given on line 3, at Testfile:4"},
		{"rate_limit {\n by user_id\n}", `rule "by user_id" has no limit: add ` + "`limit <count> <window>`, at Testfile:1"},
		{"rate_limit", `rule "by ip" has no limit`},
		{"rate_limit {\n rule a {\n  limit 10 1m\n }\n rule b {\n  by user_id\n }\n}", `rule "b" has no limit: add ` + "`limit <count> <window>`, at Testfile:5"},
		{"rate_limit {\n rule {\n  limit 10 1m\n }\n}", "wrong argument count"},
		{"rate_limit {\n rule a {\n  limit 10 1m\n }\n rule a {\n  limit 5 1s\n }\n}", `rule "a" is defined twice in this block, at Testfile:5`},
		{"rate_limit {\n rule a {\n  limit 10 1m\n  rule b {\n  }\n }\n}", "rule cannot be inside a rule block, at Testfile:4"},
		{"rate_limit {\n rule a {\n  name b\n  limit 10 1m\n }\n}", "name in a rule block: the rule is named by `rule a`, at Testfile:3"},
		{"rate_limit {\n name x\n rule a {\n  limit 10 1m\n }\n}", "name names the rule of a block without rule blocks; name each rule with `rule NAME { … }`, at Testfile:2"},
		{"rate_limit {\n max_delay 1s\n rule a {\n  limit 10 1m\n }\n}", `rule "a": max_delay applies to leaky_bucket only, not sliding_window, at Testfile:2`},
		{"rate_limit {\n rule a {\n  limit 10 1m\n  limit 20 1h\n  algorithm leaky_bucket\n }\n}", `rule "a": leaky_bucket takes one limit; put longer quotas in another rule, at Testfile:2`},
		{"rate_limit {\n rule a\" {\n  limit 10 1m\n }\n}", `must not contain '"' or '\', at Testfile:2`},
		// caddy-ratelimit's syntax
		{"rate_limit {\n zone z {\n  key {remote_host}\n  events 10\n }\n}", "zone z: a zone needs both events and window, at Testfile:2"},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  events 0\n  window 1m\n }\n}", "zone z: events 0: must be a whole number from 1 to 4294967295, at Testfile:4"},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  events 10\n  window forever\n }\n}", `window "forever": not a duration (such as 500ms, 1m or 1d), at Testfile:5`},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  key {path}\n  events 10\n  window 1m\n }\n}", "zone z: key already given on line 3, at Testfile:4"},
		{"rate_limit {\n zone z {\n  rate 10\n }\n}", `unrecognized subdirective "rate", at Testfile:3`},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  ipv4_prefix 0\n  events 10\n  window 1m\n }\n}", "zone z: ipv4_prefix 0: must be a whole number from 1 to 32, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n ipv6_prefix 129\n}", "ipv6_prefix 129: must be a whole number from 1 to 128, at Testfile:3"},
		{"rate_limit {\n limit 10 1m\n disable_metrics yes\n}", "Testfile:3"},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  ipv6_prefix 130\n  events 10\n  window 1m\n }\n}", "zone z: ipv6_prefix 130: must be a whole number from 1 to 128, at Testfile:4"},
		{"rate_limit {\n zone {\n }\n}", "wrong argument count"},
		{"rate_limit {\n limit 10 1m\n jitter -1\n}", "jitter -1: want a fraction of the wait from 0 to 10"},
		{"rate_limit {\n limit 10 1m\n retry_jitter 0.1\n jitter 0.2\n}", "retry_jitter already given on line 3, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n jitter 0.1\n retry_jitter 0.2\n}", "jitter already given on line 3, at Testfile:4"},
		{"rate_limit {\n limit 10 1m\n sweep_interval 1m\n sweep_interval 2m\n}", "sweep_interval already given on line 3, at Testfile:4"},
		{"rate_limit {\n rules_file a.yaml\n rules_file b.yaml\n}", "rules_file already given on line 2, at Testfile:3"},
		{"rate_limit {\n zone z {\n  key {remote_host}\n  events 10\n  events 20\n  window 1m\n }\n}", "zone z: events already given on line 4, at Testfile:5"},
		{"rate_limit {\n limit 10 1m\n sweep_interval often\n}", `sweep_interval "often": not a duration (such as 500ms, 1m or 1d), at Testfile:3`},
	} {
		_, err := parseTest(tc.input, "", "", nil)
		if err == nil {
			t.Errorf("Test %d: expected an error containing %q, got none", i, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Test %d: got error %q, want one containing %q", i, err, tc.want)
		}
	}
}

func TestParseCaddyfileDerivedNamesDistinct(t *testing.T) {
	derived := make(map[string]bool)
	for i, want := range []string{"example.com by ip", "example.com by ip #2", "example.com by ip #3"} {
		h, err := parseTest("rate_limit {\n limit 10 1m\n}", "example.com", "", derived)
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		if got := h.Rules[0].Name; got != want {
			t.Errorf("Test %d: got name %q, want %q", i, got, want)
		}
	}
}

func TestParseGlobalOption(t *testing.T) {
	for i, tc := range []struct {
		input    string
		existing any
		want     string // the app as JSON, or
		wantErr  string // a substring of the error
	}{
		{input: "rate_limit", want: `{}`},
		{input: "rate_limit {\n}", want: `{}`},
		{input: "rate_limit {\n sweep_interval 30s\n}", want: `{"sweep_interval":30000000000}`},
		{
			input:    "rate_limit {\n}",
			existing: httpcaddyfile.App{Name: "rate_limit", Value: []byte(`{"sweep_interval":1000000000}`)},
			want:     `{"sweep_interval":1000000000}`,
		},
		{input: "rate_limit {\n persist_interval 5s\n}", want: `{"persist_interval":5000000000}`},
		{input: "rate_limit {\n persist off\n}", want: `{"persist_off":true}`},
		{input: "rate_limit {\n persist on\n}", want: `{}`},
		{input: "rate_limit {\n persist_interval 10ms\n}", wantErr: "persist_interval 10ms: must be at least 100ms (each write scans every key), at Testfile:2"},
		{input: "rate_limit {\n persist_interval 2s\n persist off\n}", wantErr: "persist off: not with persist_interval, at Testfile:3"},
		{input: "rate_limit {\n persist off\n persist_interval 2s\n}", wantErr: "persist_interval: not with persist off, at Testfile:3"},
		{input: "rate_limit {\n persist\n}", wantErr: "persist: want on or off, at Testfile:2"},
		{input: "rate_limit {\n persist maybe\n}", wantErr: `persist "maybe": want on or off, at Testfile:2`},
		{input: "rate_limit {\n sweep_interval\n}", wantErr: "wrong argument count"},
		{input: "rate_limit {\n sweep_interval 0s\n}", wantErr: "sweep_interval 0s: must be positive, at Testfile:2"},
		{input: "rate_limit {\n sweep_interval 1ns\n}", wantErr: "sweep_interval 1ns: must be at least 1s (each sweep visits every key), at Testfile:2"},
		{input: "rate_limit {\n sweep_interval 999ms\n}", wantErr: "sweep_interval 999ms: must be at least 1s"},
		{input: "rate_limit {\n cluster_size 3\n}", wantErr: `unrecognized subdirective "cluster_size", at Testfile:2`},
		{input: "rate_limit now", wantErr: "wrong argument count"},
		{
			input: `rate_limit {
				cluster {
					bind 0.0.0.0:7946
					advertise 10.0.0.5:7946
					join 10.0.0.6:7946 10.0.0.7:7946
					join [fd00::8]:7946
					secret_key {env.EDGELIMIT_GOSSIP_KEY} AAECAwQFBgcICQoLDA0ODw==
					node_name edge-1
					label prod
					sync_interval 250ms
					on_partition fail_closed
					max_keys 5000
				}
			}`,
			want: `{"cluster":{"bind":"0.0.0.0:7946","advertise":"10.0.0.5:7946","join":["10.0.0.6:7946","10.0.0.7:7946","[fd00::8]:7946"],` +
				`"secret_keys":["{env.EDGELIMIT_GOSSIP_KEY}","AAECAwQFBgcICQoLDA0ODw=="],"node_name":"edge-1","label":"prod",` +
				`"sync_interval":250000000,"on_partition":"fail_closed","max_keys":5000}}`,
		},
		{
			// on loopback, no key is needed; placeholders are left for load time
			input: "rate_limit {\n cluster {\n  bind 127.0.0.1:0\n  join {env.PEER}\n  node_name {env.HOSTNAME}\n }\n}",
			want:  `{"cluster":{"bind":"127.0.0.1:0","join":["{env.PEER}"],"node_name":"{env.HOSTNAME}"}}`,
		},
		{
			// a placeholder bind may be loopback: the key is checked at load
			input: "rate_limit {\n cluster {\n  bind {env.GOSSIP_BIND}\n  max_keys 0\n }\n}",
			want:  `{"cluster":{"bind":"{env.GOSSIP_BIND}"}}`,
		},
		{
			// the cluster in one rate_limit option, the rest in another
			input:    "rate_limit {\n sweep_interval 1s\n}",
			existing: httpcaddyfile.App{Name: "rate_limit", Value: []byte(`{"cluster":{"bind":"127.0.0.1:7946"}}`)},
			want:     `{"sweep_interval":1000000000,"cluster":{"bind":"127.0.0.1:7946"}}`,
		},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:7946\n  gossip_port 7946\n }\n}", wantErr: `cluster: unrecognized subdirective "gossip_port", at Testfile:4`},
		{input: "rate_limit {\n cluster extra {\n  bind 127.0.0.1:7946\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'extra', at Testfile:2"},
		{input: "rate_limit {\n cluster {\n  bind\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'bind', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:1 127.0.0.1:2\n }\n}", wantErr: "wrong argument count or unexpected line ending after '127.0.0.1:1', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  advertise\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'advertise', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  join\n }\n}", wantErr: "cluster: join: list the host:port of one or more nodes, at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  secret_key\n }\n}", wantErr: "cluster: secret_key: give one or more base64 keys, such as {env.EDGELIMIT_GOSSIP_KEY} (the first encrypts, all decrypt), at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  node_name\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'node_name', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  label\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'label', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  sync_interval\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'sync_interval', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  on_partition\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'on_partition', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  max_keys\n }\n}", wantErr: "wrong argument count or unexpected line ending after 'max_keys', at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:7946\n  on_partition fail_safe\n }\n}", wantErr: `cluster on_partition "fail_safe": want local_share, fail_open or fail_closed, at Testfile:4`},
		{input: "rate_limit {\n cluster {\n  sync_interval often\n }\n}", wantErr: `cluster sync_interval "often": not a duration (such as 500ms, 1m or 1d), at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  sync_interval 0s\n }\n}", wantErr: "cluster sync_interval 0s: must be positive, at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  sync_interval -1s\n }\n}", wantErr: "cluster sync_interval -1s: must not be negative, at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  max_keys -1\n }\n}", wantErr: "cluster max_keys -1: must be a whole number ≥ 0 (0: the default, 10000), at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  max_keys lots\n }\n}", wantErr: "cluster max_keys lots: must be a whole number ≥ 0"},
		{input: "rate_limit {\n cluster {\n  bind 0.0.0.0\n }\n}", wantErr: `cluster bind "0.0.0.0": want host:port, such as 10.0.0.5:7946, at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:gossip\n }\n}", wantErr: `cluster bind "127.0.0.1:gossip": the port must be a number from 0 to 65535, at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  advertise 10.0.0.5\n }\n}", wantErr: `cluster advertise "10.0.0.5": want host:port, such as 10.0.0.5:7946, at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  join 10.0.0.6:7946 10.0.0.7\n }\n}", wantErr: `cluster join "10.0.0.7": want host:port, such as 10.0.0.5:7946, at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  join 10.0.0.6:70000\n }\n}", wantErr: `cluster join "10.0.0.6:70000": the port must be a number from 0 to 65535, at Testfile:3`},
		{input: "rate_limit {\n cluster {\n  secret_key not*base64\n }\n}", wantErr: "cluster secret_key 1: not base64 (generate a key with: head -c 32 /dev/urandom | base64), at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  secret_key {env.K} c2hvcnQ=\n }\n}", wantErr: "cluster secret_key 2: 5 bytes, want 16, 24 or 32 (generate a key with: head -c 32 /dev/urandom | base64), at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  join 10.0.0.6:7946\n }\n}", wantErr: "cluster: bind 0.0.0.0:7946: a secret key is required to bind beyond loopback, or cluster traffic would be unauthenticated and in clear, at Testfile:2"},
		{input: "rate_limit {\n cluster {\n  bind localhost:7946\n }\n}", wantErr: "cluster: bind localhost:7946: a secret key is required to bind beyond loopback"}, // a name may resolve to anything
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:7946\n  bind 127.0.0.1:7947\n }\n}", wantErr: "cluster: bind already given on line 3, at Testfile:4"},
		{input: "rate_limit {\n cluster {\n  secret_key {env.A}\n  secret_key {env.B}\n }\n}", wantErr: "cluster: secret_key already given on line 3, at Testfile:4"},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:7946\n  on_partition fail_open\n  on_partition fail_closed\n }\n}", wantErr: "cluster: on_partition already given on line 4, at Testfile:5"},
		{input: "rate_limit {\n jwt {\n  algorithms HS256\n  issuer a\n  issuer b\n }\n}", wantErr: "jwt: issuer already given on line 4, at Testfile:5"},
		{input: "rate_limit {\n jwt {\n  algorithms HS256\n }\n jwt {\n  algorithms HS256\n }\n}", wantErr: "jwt already given on line 2, at Testfile:5"},
		{input: "rate_limit {\n sweep_interval 1m\n sweep_interval 2m\n}", want: `{"sweep_interval":120000000000}`}, // not a block: the last wins
		{input: "rate_limit {\n cluster {\n  label " + strings.Repeat("x", 256) + "\n }\n}", wantErr: "cluster label: 256 bytes, the most is 255, at Testfile:3"},
		{input: "rate_limit {\n cluster {\n  bind 127.0.0.1:7946\n }\n cluster {\n  bind 127.0.0.1:7947\n }\n}", wantErr: "cluster already given on line 2, at Testfile:5"},
		{
			input:    "rate_limit {\n cluster {\n  bind 127.0.0.1:7947\n }\n}",
			existing: httpcaddyfile.App{Name: "rate_limit", Value: []byte(`{"cluster":{"bind":"127.0.0.1:7946"}}`)},
			wantErr:  "cluster already given, at Testfile:2",
		},
	} {
		got, err := parseGlobalOption(caddyfile.NewTestDispenser(tc.input), tc.existing)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Test %d: got error %v, want one containing %q", i, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Test %d: unexpected error: %v", i, err)
			continue
		}
		app, ok := got.(httpcaddyfile.App)
		if !ok || app.Name != "rate_limit" {
			t.Errorf("Test %d: got %#v, want an httpcaddyfile.App named rate_limit", i, got)
			continue
		}
		if string(app.Value) != tc.want {
			t.Errorf("Test %d: got %s, want %s", i, app.Value, tc.want)
		}
	}
}

// TestCaddyfileDerivedNameHasSiteAddress adapts a whole Caddyfile, so that a Caddy
// release that renames httpcaddyfile.Helper's parentBlock (which
// siteAddresses reads with reflect) is caught here.
func TestCaddyfileDerivedNameHasSiteAddress(t *testing.T) {
	input := "http://localhost:8080, http://127.0.0.1:8080 {\n\trate_limit @api {\n\t\tlimit 10 1m\n\t\tby ip/24\n\t}\n\t@api path /api/*\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `"name":"http://localhost:8080,http://127.0.0.1:8080 @api by ip/24"`
	if !strings.Contains(string(out), want) {
		t.Errorf("adapted config lacks %s (did httpcaddyfile.Helper's parentBlock change?):\n%s", want, out)
	}
}

// TestAdaptStoreSentinel adapts a whole Caddyfile with a store redis
// block on Sentinels, with their credentials.
func TestAdaptStoreSentinel(t *testing.T) {
	input := "{\n\trate_limit {\n\t\tstore redis {\n\t\t\taddress 10.0.0.1:26379 10.0.0.2:26379 10.0.0.3:26379\n" +
		"\t\t\tsentinel_master mymaster\n\t\t\tpassword {env.REDIS_PASSWORD}\n\t\t\tsentinel_username watcher\n" +
		"\t\t\tsentinel_password {env.SENTINEL_PASSWORD}\n\t\t}\n\t}\n}\n\n" +
		"http://localhost:8080 {\n\trate_limit {\n\t\tlimit 100 1m\n\t\tstore redis\n\t}\n\trespond \"ok\"\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			RateLimit json.RawMessage `json:"rate_limit"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	want := `{"store":{"redis":{"addresses":["10.0.0.1:26379","10.0.0.2:26379","10.0.0.3:26379"],"password":"{env.REDIS_PASSWORD}",` +
		`"sentinel_master":"mymaster","sentinel_username":"watcher","sentinel_password":"{env.SENTINEL_PASSWORD}"}}}`
	if got := string(cfg.Apps.RateLimit); got != want {
		t.Errorf("rate_limit app:\n got %s\nwant %s", got, want)
	}
	_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(strings.Replace(input, "sentinel_master mymaster", "cluster off", 1)), nil)
	if err == nil || !strings.Contains(err.Error(), "need sentinel_master") || !strings.Contains(err.Error(), "Caddyfile:7") {
		t.Errorf("without sentinel_master: error %v, want one saying sentinel_master is needed, at Caddyfile:7", err)
	}
}

// parseRulesFile reads a rules file's text as a config load does.
func parseRulesFile(data []byte, file, namePrefix string) ([]ruleconfig.Rule, error) {
	return rulesyntax.ParseRulesFile(data, file, namePrefix, caddymodule.RuleChecks())
}
