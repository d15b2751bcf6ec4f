package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestAdoptZones: mholt/caddy-ratelimit's JSON handler config loads
// unchanged and becomes the rules its Caddyfile form becomes.
func TestAdoptZones(t *testing.T) {
	for i, tc := range []struct {
		json string
		want string // the rules, as JSON
		err  string
	}{{
		// the peer's TestRateLimits
		json: `{"handler": "rate_limit", "rate_limits": {"zone1": {"match": [{"method": ["GET"]}], "key": "static", "window": "60s", "max_events": 10}}}`,
		want: `[{"name":"zone1","match":[{"method":["GET"]}],"limits":[{"count":10,"window":60000000000}],"algorithm":"sliding_log","by":["static static"]}]`,
	}, {
		// the peer's README, with every handler-level field
		json: `{"handler": "rate_limit", "rate_limits": {
			"static_example": {"match": [{"method": ["GET"]}], "key": "static", "window": "1m", "max_events": 100},
			"dynamic_example": {"key": "{http.request.remote.host}", "window": "5s", "max_events": 2, "ipv4_prefix": 24, "ipv6_prefix": 64}},
			"jitter": 0.2, "sweep_interval": "2m", "log_key": true, "disable_metrics": true,
			"distributed": {"write_interval": "5s", "read_interval": "5s", "purge_age": "1m"}, "storage": {"module": "file_system", "root": "/tmp/x"}}`,
		want: `[{"name":"dynamic_example","limits":[{"count":2,"window":5000000000}],"algorithm":"sliding_log","by":["{http.request.remote.host}"],"on_missing_key":"ip","retry_jitter":0.2,"log_key":true,"ipv4_prefix":24,"ipv6_prefix":64,"disable_metrics":true},` +
			`{"name":"static_example","match":[{"method":["GET"]}],"limits":[{"count":100,"window":60000000000}],"algorithm":"sliding_log","by":["static static"],"retry_jitter":0.2,"log_key":true,"disable_metrics":true}]`,
	}, {
		json: `{"rate_limits": {"z": {"key": "{path}", "window": "1m"}}}`,
		err:  "rate_limits: zone z: a zone needs both events (max_events) and window",
	}, {
		json: `{"rate_limits": {"z": {"key": "{path}", "window": "1m", "max_events": 5, "ipv4_prefix": 33}}}`,
		err:  "rate_limits: zone z: ipv4_prefix 33, ipv6_prefix 0: must be 1 to 32 and 1 to 128",
	}, {
		json: `{"rate_limits": {"z": {"key": "{path}", "window": "1m", "max_events": 5}}, "jitter": -1}`,
		err:  "jitter -1: must be ≥ 0",
	}, {
		json: `{"rate_limits": {"z": {"key": "{path}", "window": "1m", "max_events": 5, "burst": 3}}}`,
		err:  `unknown field "burst"`,
	}} {
		var h Handler
		dec := json.NewDecoder(strings.NewReader(strings.Replace(tc.json, `"handler": "rate_limit", `, "", 1)))
		dec.DisallowUnknownFields() // as Caddy decodes a module's config
		err := dec.Decode(&h)
		if err == nil {
			h.logger = zap.NewNop()
			err = h.adoptZones()
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Test %d: error %v, want one containing %q", i, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		got, _ := json.Marshal(h.Rules)
		if string(got) != tc.want {
			t.Errorf("Test %d: rules\n%s\nwant\n%s", i, got, tc.want)
		}
	}
}
