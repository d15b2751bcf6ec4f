package appconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestRedisSettings(t *testing.T) {
	t.Setenv("EDGELIMIT_TEST_REDIS", "127.0.0.1:6390")
	s, err := (&RedisConfig{Addresses: []string{"{env.EDGELIMIT_TEST_REDIS}"}}).Settings()
	if err != nil {
		t.Fatal(err)
	}
	if s.Addrs[0] != "127.0.0.1:6390" || s.Timeout != defaultStoreTimeout || s.Probe != time.Second || s.Prefix != "edgelimit:" {
		t.Errorf("defaults: %+v", s)
	}
	other, _ := (&RedisConfig{Addresses: []string{"127.0.0.1:6390"}, KeyPrefix: "x:", ProbeInterval: caddy.Duration(time.Minute)}).Settings()
	if other.Print != s.Print {
		t.Error("a prefix or probe interval changes the client: they should not")
	}
	if third, _ := (&RedisConfig{Addresses: []string{"127.0.0.1:6390"}, Password: "p"}).Settings(); third.Print == s.Print {
		t.Error("a password does not change the client")
	}
	for i, tc := range []struct {
		cfg  RedisConfig
		want string
	}{
		{RedisConfig{}, "store redis: no address"},
		{RedisConfig{Addresses: []string{"{env.EDGELIMIT_TEST_UNSET}"}}, `store redis: address "": want host:port`},
		{RedisConfig{Addresses: []string{"a:1", "b:2"}}, "store redis: 2 addresses"},
		{RedisConfig{Addresses: []string{"a:1"}, Cluster: true, SentinelMaster: "m"}, "choose one"},
		{RedisConfig{Addresses: []string{"a:1"}, DB: -1}, "store redis: db -1: must not be negative"},
		{RedisConfig{Addresses: []string{"a:1"}, Cluster: true, DB: 1}, "a Redis Cluster has only db 0"},
		{RedisConfig{Addresses: []string{"a:1"}, Timeout: -1}, "store redis: timeout -1ns: must be positive"},
		{RedisConfig{Addresses: []string{"a:1"}, ProbeInterval: -1}, "store redis: probe_interval -1ns: must be positive"},
		{RedisConfig{Addresses: []string{"a:1"}, KeyPrefix: "{x}"}, "must not contain"},
	} {
		if _, err := tc.cfg.Settings(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Test %d: error %v, want %q", i, err, tc.want)
		}
	}
}

// TestRedisSentinelAuthSettings: the Sentinels' credentials have their
// placeholders replaced, tell clients apart (the pool's key), and without
// sentinel_master are an error in JSON as in the Caddyfile.
func TestRedisSentinelAuthSettings(t *testing.T) {
	t.Setenv("EDGELIMIT_TEST_SENTINEL_PASSWORD", "s3cret")
	cfg := RedisConfig{
		Addresses:        []string{"127.0.0.1:26379", "127.0.0.1:26380"},
		SentinelMaster:   "mymaster",
		SentinelUsername: "watcher",
		SentinelPassword: "{env.EDGELIMIT_TEST_SENTINEL_PASSWORD}",
	}
	s, err := cfg.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if s.SentinelUsername != "watcher" || s.SentinelPassword != "s3cret" {
		t.Errorf("sentinel credentials %q, %q; want watcher, s3cret", s.SentinelUsername, s.SentinelPassword)
	}
	for i, change := range []func(c *RedisConfig){
		func(c *RedisConfig) { c.SentinelPassword = "other" },
		func(c *RedisConfig) { c.SentinelPassword = "" },
		func(c *RedisConfig) { c.SentinelUsername = "" },
	} {
		other := cfg
		change(&other)
		if o, err := other.Settings(); err != nil || o.Print == s.Print {
			t.Errorf("Test %d: settings %v; the same client as before the change: %v", i, err, o.Print == s.Print)
		}
	}
	for _, c := range []RedisConfig{
		{Addresses: []string{"127.0.0.1:6379"}, SentinelPassword: "p"},
		{Addresses: []string{"127.0.0.1:7000"}, Cluster: true, SentinelUsername: "u"},
	} {
		if _, err := c.Settings(); err == nil || !strings.Contains(err.Error(), "need sentinel_master") {
			t.Errorf("%+v: error %v, want one saying sentinel_master is needed", c, err)
		}
	}
}
