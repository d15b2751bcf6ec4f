package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinelFailover: SENTINEL FAILOVER promotes the replica, with the
// write the master took before it; the old master, alive, is demoted.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and Sentinels; skipped with -short")
	}
	t.Parallel()
	s := StartSentinel(t, SentinelOptions{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.Master.Addr})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.WaitReplicated(t, s.Master.Addr)
	t0 := time.Now()
	s.Failover(t)
	if got := s.WaitMaster(t, s.Master.Addr); got != s.Replica {
		t.Fatalf("new master %s, want the replica %s", got.Addr, s.Replica.Addr)
	}
	t.Logf("SENTINEL FAILOVER to a new master: %s", time.Since(t0).Round(time.Millisecond))
	r := redis.NewClient(&redis.Options{Addr: s.Replica.Addr})
	defer r.Close()
	if v, err := r.Get(ctx, "k").Result(); v != "v" || err != nil {
		t.Errorf("GET k on the new master: %q, %v; want v", v, err)
	}
}

// TestSentinelKillMaster: with passwords on the Sentinels and on the
// data servers, a killed master is replaced by its replica, named by every
// Sentinel; a Sentinel refuses a client without the password.
func TestSentinelKillMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and Sentinels; skipped with -short")
	}
	t.Parallel()
	s := StartSentinel(t, SentinelOptions{Password: "sentinel-secret", MasterPassword: "master-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	anon := redis.NewSentinelClient(&redis.Options{Addr: s.Addrs()[0], MaxRetries: -1})
	defer anon.Close()
	if _, err := anon.GetMasterAddrByName(ctx, SentinelMaster).Result(); err == nil || !redis.HasErrorPrefix(err, "NOAUTH") {
		t.Errorf("a Sentinel without its password: %v, want NOAUTH", err)
	}
	t0 := time.Now()
	s.Master.Kill()
	if got := s.WaitMaster(t, s.Master.Addr); got != s.Replica {
		t.Fatalf("new master %s, want the replica %s", got.Addr, s.Replica.Addr)
	}
	t.Logf("master killed to a new master: %s", time.Since(t0).Round(time.Millisecond))
}
