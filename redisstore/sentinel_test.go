package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// Passwords of the Sentinels and of the master and replica in the
// Sentinel tests: distinct, so that each reaches only its own.
const (
	sentinelPassword = "sentinel-secret"
	masterPassword   = "master-secret"
)

// newFailoverClient is a client to the master the Sentinels of sn name,
// as the Store wants one.
func newFailoverClient(t testing.TB, sn *redistest.Sentinel, sentinelPass string) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:       redistest.SentinelMaster,
		SentinelAddrs:    sn.Addrs(),
		SentinelPassword: sentinelPass,
		Password:         masterPassword,

		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSentinel: on a master found through three Sentinels, every
// algorithm counts exactly (10 of 15 calls pass). The master killed, the
// Sentinels promote its replica; meanwhile every call fails with
// ErrUnavailable, none hangs past its deadline; then the new master
// decides: a key spent before the failover (replicated: WAIT) stays
// spent, a fresh key gets exactly 10, and its state is on the new master.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and Sentinels; skipped with -short")
	}
	sn := redistest.StartSentinel(t, redistest.SentinelOptions{Password: sentinelPassword, MasterPassword: masterPassword})
	c := newFailoverClient(t, sn, sentinelPassword)
	stores := make(map[limiter.Algorithm]*Store)
	for _, algo := range algorithms {
		cfg := config(algo, hour)
		cfg.KeyPrefix = "test:sentinel:" + string(algo) + ":"
		cfg.ProbeInterval = 100 * time.Millisecond
		stores[algo] = newStore(t, c, cfg)
		if got := allowed(t, stores[algo], "spent", 15); got != 10 {
			t.Errorf("%s before the failover: %d of 15 allowed, want 10", algo, got)
		}
	}
	sn.WaitReplicated(t, sn.Master.Addr)

	t0 := time.Now()
	sn.Master.Kill()
	s := stores[limiter.SlidingWindow]
	var failures int
	var slowest time.Duration
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		t1 := time.Now()
		d, err := s.Peek(ctx, "spent", 1)
		cancel()
		slowest = max(slowest, time.Since(t1))
		if err == nil {
			if d.Allowed {
				t.Errorf("the spent key is allowed on the new master: not replicated")
			}
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("during the failover: %v, want ErrUnavailable", err)
		}
		failures++
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("no answer 30s after the master was killed: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
	t.Logf("master killed: decisions again after %s; %d calls failed with ErrUnavailable, the slowest took %s",
		time.Since(t0).Round(time.Millisecond), failures, slowest.Round(time.Millisecond))
	if slowest > time.Second {
		t.Errorf("a call took %s with a 200ms deadline", slowest)
	}
	master := sn.WaitMaster(t, sn.Master.Addr)
	direct := redis.NewClient(&redis.Options{Addr: master.Addr, Password: masterPassword})
	t.Cleanup(func() { direct.Close() })
	for _, algo := range algorithms {
		st := stores[algo]
		if d := allow(t, st, "spent", 1); d.Allowed {
			t.Errorf("%s after the failover: the spent key is allowed", algo)
		}
		if got := allowed(t, st, "fresh", 15); got != 10 {
			t.Errorf("%s after the failover: %d of 15 allowed, want 10", algo, got)
		}
		if n, err := direct.Exists(context.Background(), st.RedisKeys("fresh")[0]).Result(); n != 1 || err != nil {
			t.Errorf("%s: the fresh key on the new master %s: exists %d, %v", algo, master.Addr, n, err)
		}
	}
}

// TestSentinelAuth: without the Sentinels' password the client finds no
// master, and a Store call fails (the master's password is not theirs).
func TestSentinelAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and Sentinels; skipped with -short")
	}
	sn := redistest.StartSentinel(t, redistest.SentinelOptions{Password: sentinelPassword, MasterPassword: masterPassword})
	s := newStore(t, newFailoverClient(t, sn, ""), config(limiter.FixedWindow, hour))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := s.Allow(ctx, "k", 1)
	t.Logf("without the Sentinels' password: %v", err)
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") || !errors.Is(err, ErrUnavailable) {
		t.Errorf("without the Sentinels' password: %v, want a NOAUTH error, unavailable (the breaker holds calls off)", err)
	}
	s = newStore(t, newFailoverClient(t, sn, sentinelPassword), config(limiter.FixedWindow, hour))
	if got := allowed(t, s, "k", 12); got != 10 {
		t.Errorf("with the Sentinels' password: %d of 12 allowed, want 10", got)
	}
}

// allowed calls s.Allow n times on key and counts the calls allowed.
func allowed(t testing.TB, s *Store, key string, n int) int {
	t.Helper()
	var ok int
	for range n {
		if allow(t, s, key, 1).Allowed {
			ok++
		}
	}
	return ok
}
