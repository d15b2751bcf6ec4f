package adapt

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

func TestParseStoreOption(t *testing.T) {
	for i, tc := range []struct {
		input    string
		want     string // the app as JSON, or
		wantErr  string // a substring of the error
		wantErr2 string // and another
	}{
		{
			input: "rate_limit {\n store redis {\n  address 10.0.0.9:6379\n }\n}",
			want:  `{"store":{"redis":{"addresses":["10.0.0.9:6379"]}}}`,
		},
		{
			input: `rate_limit {
				store redis {
					address {env.REDIS_ADDR}
					username edge
					password {env.REDIS_PASSWORD}
					db 2
					tls on
					timeout 80ms
					key_prefix rl:
					probe_interval 500ms
				}
			}`,
			want: `{"store":{"redis":{"addresses":["{env.REDIS_ADDR}"],"username":"edge","password":"{env.REDIS_PASSWORD}","db":2,"tls":true,` +
				`"timeout":80000000,"key_prefix":"rl:","probe_interval":500000000}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address 10.0.0.1:7000 10.0.0.2:7000\n  address 10.0.0.3:7000\n  cluster on\n  tls\n }\n}",
			want:  `{"store":{"redis":{"addresses":["10.0.0.1:7000","10.0.0.2:7000","10.0.0.3:7000"],"tls":true,"cluster":true}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address 10.0.0.1:26379 10.0.0.2:26379\n  sentinel_master mymaster\n  cluster off\n }\n}",
			want:  `{"store":{"redis":{"addresses":["10.0.0.1:26379","10.0.0.2:26379"],"sentinel_master":"mymaster"}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address a:1\n  coalesce off\n  over_limit_cache off\n }\n}",
			want:  `{"store":{"redis":{"addresses":["a:1"],"no_over_limit_cache":true}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address a:1\n  coalesce\n  over_limit_cache on\n }\n}",
			want:  `{"store":{"redis":{"addresses":["a:1"],"coalesce":true}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address a:1\n  pipeline off\n }\n}",
			want:  `{"store":{"redis":{"addresses":["a:1"],"no_pipeline":true}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  address a:1\n  pipeline on\n }\n}",
			want:  `{"store":{"redis":{"addresses":["a:1"]}}}`,
		},
		{input: "rate_limit {\n store redis {\n  address a:1\n  pipeline batched\n }\n}", wantErr: `store redis pipeline "batched": want on or off, at Testfile:4`},
		{input: "rate_limit {\n store redis {\n  address a:1\n  coalesce sometimes\n }\n}", wantErr: `store redis coalesce "sometimes": want on or off, at Testfile:4`},
		{input: "rate_limit {\n store {\n }\n}", wantErr: "store: want redis, as in `store redis { address 10.0.0.9:6379 }`, at Testfile:2"},
		{input: "rate_limit {\n store memcached {\n }\n}", wantErr: `store "memcached": want redis, at Testfile:2`},
		{input: "rate_limit {\n store redis {\n }\n}", wantErr: "store redis: address is required (host:port of the server, the Redis Cluster seeds or the Sentinels), at Testfile:2"},
		{input: "rate_limit {\n store redis {\n  address localhost\n }\n}", wantErr: `store redis: address "localhost": want host:port, such as 10.0.0.9:6379, at Testfile:3`},
		{input: "rate_limit {\n store redis {\n  address localhost:99999\n }\n}", wantErr: `the port must be a number from 1 to 65535, at Testfile:3`},
		{input: "rate_limit {\n store redis {\n  address a:1\n  db -1\n }\n}", wantErr: "store redis: db -1: must be a whole number ≥ 0, at Testfile:4"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  timeout 0s\n }\n}", wantErr: "store redis timeout 0s: must be positive, at Testfile:4"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  timeout -5ms\n }\n}", wantErr: "store redis timeout -5ms: must not be negative, at Testfile:4"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  probe_interval 0s\n }\n}", wantErr: "store redis probe_interval 0s: must be positive, at Testfile:4"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  tls maybe\n }\n}", wantErr: `store redis tls "maybe": want on or off, at Testfile:4`},
		{input: "rate_limit {\n store redis {\n  address a:1\n  key_prefix a{b}:\n }\n}", wantErr: `key_prefix "a{b}:": must not contain '{' or '}'`},
		{input: "rate_limit {\n store redis {\n  address a:1\n  hosts b:2\n }\n}", wantErr: `store redis: unrecognized subdirective "hosts", at Testfile:4`},
		{input: "rate_limit {\n store redis {\n  address a:1\n  db 1\n  db 2\n }\n}", wantErr: "store redis: db already given on line 4, at Testfile:5"},
		{
			input:   "rate_limit {\n store redis {\n  address a:1\n  cluster on\n  sentinel_master m\n }\n}",
			wantErr: "store redis: cluster on and sentinel_master: choose one (a Redis Cluster, or a master found through Sentinels), at Testfile:5",
		},
		{input: "rate_limit {\n store redis {\n  address a:1 b:2\n }\n}", wantErr: "store redis: 2 addresses: one server has one address", wantErr2: "at Testfile:3"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  cluster on\n  db 3\n }\n}", wantErr: "store redis: db 3: a Redis Cluster has only db 0, at Testfile:5"},
		{input: "rate_limit {\n store redis {\n  address a:1\n }\n store redis {\n  address a:1\n }\n}", wantErr: "store already given on line 2, at Testfile:5"},
		// sentinel_username and sentinel_password go to JSON as written
		// (placeholders are replaced at load), and need sentinel_master
		{
			input: "rate_limit {\n store redis {\n  address 10.0.0.1:26379 10.0.0.2:26379\n  sentinel_master mymaster\n" +
				"  password {env.REDIS_PASSWORD}\n  sentinel_username watcher\n  sentinel_password {env.SENTINEL_PASSWORD}\n }\n}",
			want: `{"store":{"redis":{"addresses":["10.0.0.1:26379","10.0.0.2:26379"],"password":"{env.REDIS_PASSWORD}",` +
				`"sentinel_master":"mymaster","sentinel_username":"watcher","sentinel_password":"{env.SENTINEL_PASSWORD}"}}}`,
		},
		{
			input: "rate_limit {\n store redis {\n  sentinel_password s3cret\n  address 10.0.0.1:26379\n  sentinel_master mymaster\n }\n}",
			want:  `{"store":{"redis":{"addresses":["10.0.0.1:26379"],"sentinel_master":"mymaster","sentinel_password":"s3cret"}}}`,
		},
		{
			input:   "rate_limit {\n store redis {\n  address a:1\n  sentinel_password p\n }\n}",
			wantErr: "store redis: sentinel_username and sentinel_password need sentinel_master (they authenticate to Sentinels; password is the server's), at Testfile:4",
		},
		{
			input:   "rate_limit {\n store redis {\n  address a:1\n  cluster on\n  sentinel_username u\n }\n}",
			wantErr: "store redis: sentinel_username and sentinel_password need sentinel_master (they authenticate to Sentinels; password is the server's), at Testfile:5",
		},
		{
			input:   "rate_limit {\n store redis {\n  address a:1\n  sentinel_master m\n  sentinel_password p\n  sentinel_password q\n }\n}",
			wantErr: "store redis: sentinel_password already given on line 5, at Testfile:6",
		},
		{input: "rate_limit {\n store redis {\n  address a:1\n  sentinel_master m\n  sentinel_password\n }\n}", wantErr: "wrong argument count"},
		{input: "rate_limit {\n store redis {\n  address a:1\n  sentinel_master m\n  sentinel_username u v\n }\n}", wantErr: "wrong argument count"},
	} {
		got, err := parseGlobalOption(caddyfile.NewTestDispenser(tc.input), nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.wantErr2) {
				t.Errorf("Test %d: got error %v, want one containing %q", i, err, tc.wantErr+" … "+tc.wantErr2)
			}
			continue
		}
		if err != nil {
			t.Errorf("Test %d: unexpected error: %v", i, err)
			continue
		}
		if app := got.(httpcaddyfile.App); string(app.Value) != tc.want {
			t.Errorf("Test %d: got %s, want %s", i, app.Value, tc.want)
		}
	}
}

func TestParseRuleStore(t *testing.T) {
	h, err := parseTest("rate_limit {\n limit 10 1m\n on_store_error fail_closed\n rule a {\n  store redis\n }\n rule b {\n  store redis\n  on_store_error fail_open\n }\n}", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(h.Rules)
	want := `[{"name":"a","limits":[{"count":10,"window":60000000000}],"store":"redis","on_store_error":"fail_closed"},` +
		`{"name":"b","limits":[{"count":10,"window":60000000000}],"store":"redis","on_store_error":"fail_open"}]`
	if string(got) != want {
		t.Errorf("rules:\n got %s\nwant %s", got, want)
	}
	for i, tc := range []struct{ input, want string }{
		{"rate_limit {\n limit 10 1m\n store memcached\n}", `store "memcached": want local or redis, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n store redis\n on_store_error ignore\n}", `on_store_error "ignore": want local, fail_open or fail_closed, at Testfile:4`},
		{"rate_limit {\n limit 10 1m\n store redis\n scope cluster\n}", `store redis and scope cluster: choose one`},
		{"rate_limit {\n limit 10 1m\n scope cluster\n store redis\n}", `at Testfile:4`},
		{"rate_limit {\n limit 10 1m\n store redis\n scope node\n}", `store redis and scope node: choose one`},
		{"rate_limit {\n limit 10 1m\n on_store_error fail_open\n}", `on_store_error applies to store redis only, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n store local\n on_store_error fail_open\n}", `on_store_error applies to store redis only, at Testfile:3`},
		{"rate_limit {\n limit 10 1m\n store redis\n store local\n}", `store already given on line 3, at Testfile:4`},
	} {
		_, err := parseTest(tc.input, "", "", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Test %d: got error %v, want one containing %q", i, err, tc.want)
		}
	}
	rules, err := parseRulesFile([]byte("rate_limit:\n  - name: y\n    limit: 5 1m\n    store: redis\n    on_store_error: fail_closed\n"), "r.yaml", "")
	if err != nil || len(rules) != 1 || rules[0].Store != ruleconfig.StoreRedis || rules[0].OnStoreError != ruleconfig.StoreErrorFailClosed {
		t.Errorf("YAML: %+v, %v", rules, err)
	}
	if _, err := parseRulesFile([]byte("rate_limit:\n  - limit: 5 1m\n    store: disk\n"), "r.yaml", ""); err == nil || !strings.Contains(err.Error(), `store "disk": want local or redis, at r.yaml:3`) {
		t.Errorf("YAML bad store: %v", err)
	}
}
