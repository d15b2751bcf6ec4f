package appconfig

import (
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/gossip"
)

func TestClusterSettings(t *testing.T) {
	s, err := (&ClusterConfig{Bind: "127.0.0.1:0"}).Settings()
	if err != nil {
		t.Fatal(err)
	}
	if s.Gossip.SyncInterval != gossip.DefaultSyncInterval || s.Policy != gossip.LocalShare || s.PolicyText != PartitionLocalShare {
		t.Errorf("defaults: %+v", s)
	}
	if s, err := (&ClusterConfig{}).Settings(); err == nil || !strings.Contains(err.Error(), "secret key is required") {
		t.Errorf("default bind 0.0.0.0 without a key: %v, %+v", err, s.Gossip)
	}
	if _, err := (&ClusterConfig{SecretKeys: []string{testKey}}).Settings(); err != nil {
		t.Errorf("default bind with a key: %v", err)
	}
	for _, c := range []struct {
		cfg  ClusterConfig
		want string
	}{
		{ClusterConfig{Bind: "127.0.0.1"}, `cluster bind "127.0.0.1": want host:port`},
		{ClusterConfig{Bind: "127.0.0.1:0", Advertise: "10.0.0.1"}, `cluster advertise "10.0.0.1": want host:port`},
		{ClusterConfig{Bind: "127.0.0.1:0", Join: []string{"a:1", "b"}}, `cluster join "b": want host:port`},
		{ClusterConfig{Bind: "127.0.0.1:0", SecretKeys: []string{"%%%"}}, `cluster secret_key 1: not base64`},
		{ClusterConfig{Bind: "127.0.0.1:0", SecretKeys: []string{testKey, "c2hvcnQ="}}, `cluster secret_key 2: 5 bytes, want 16, 24 or 32`},
		{ClusterConfig{Bind: "10.1.2.3:7946"}, `cluster bind 10.1.2.3:7946: a secret key is required`},
		{ClusterConfig{Bind: "127.0.0.1:0", OnPartition: "panic"}, `cluster on_partition "panic": want local_share, fail_open or fail_closed`},
		{ClusterConfig{Bind: "127.0.0.1:0", SyncInterval: -1}, `cluster sync_interval -1ns: must be positive`},
		{ClusterConfig{Bind: "127.0.0.1:0", MaxKeys: -1}, `cluster max_keys -1: must not be negative`},
	} {
		_, err := c.cfg.Settings()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
}

// testKey is a secret_key: base64 of 32 bytes.
const testKey = "c2VjcmV0LWtleS1mb3ItdGVzdHMtMzItYnl0ZXMhISE="
