package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestOverLimitCache: once Redis denies a key, its requests are denied
// without a call until the denial's RetryAfter (a second at most), with the
// wait counted down; a smaller cost, another scale, a refund or a reset
// ask Redis again, and so does every request after that.
func TestOverLimitCache(t *testing.T) {
	_, c := start(t)
	cfg := config(limiter.FixedWindow, limiter.Limit{Count: 3, Window: time.Hour})
	cfg.OverLimitCacheKeys = 100
	s := newStore(t, c, cfg)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	for range 3 {
		if d := allow(t, s, "k", 1); !d.Allowed {
			t.Fatal("denied under the limit")
		}
	}
	denied := allow(t, s, "k", 1)
	if denied.Allowed || s.Stats().Calls != 4 {
		t.Fatalf("4th request: %+v, stats %+v; want denied by Redis", denied, s.Stats())
	}
	clock = clock.Add(500 * time.Millisecond)
	d := allow(t, s, "k", 2)
	if d.Allowed || s.Stats().Calls != 4 || s.Stats().OverLimitCached != 1 {
		t.Fatalf("cost 2 after a denial of 1: %+v, stats %+v; want denied from the cache", d, s.Stats())
	}
	if d.RetryAfter != denied.RetryAfter-500*time.Millisecond || d.Quotas[0].Reset != denied.Quotas[0].Reset-500*time.Millisecond || d.Quotas[0].Remaining != 0 {
		t.Fatalf("cached denial %+v: want the wait of %+v less 0.5s", d, denied)
	}
	if _, err := s.AllowScaled(t.Context(), "k", 1, 0.5); err != nil || s.Stats().Calls != 5 {
		t.Fatalf("another scale: %v, %+v; want a call", err, s.Stats())
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"a refund", func() {
			if err := s.Refund(t.Context(), "k", limiter.Taken{At: time.Now(), Cost: 1, Scale: 1}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a reset", func() {
			if err := s.Reset(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		step.do()
		calls := s.Stats().Calls
		if d := allow(t, s, "k", 1); !d.Allowed || s.Stats().Calls != calls+1 {
			t.Fatalf("after %s: %+v, %d calls; want admitted by Redis", step.name, d, s.Stats().Calls-calls)
		}
		for range 4 {
			allow(t, s, "k", 1) // spend it again, and be denied
		}
	}
	// A denial is kept for a second at most, whatever its RetryAfter
	// (here most of an hour): units freed on another node show by then.
	calls := s.Stats().Calls
	clock = clock.Add(time.Second)
	if allow(t, s, "k", 1); s.Stats().Calls != calls+1 {
		t.Fatal("a second after the denial: want a call")
	}
}

// TestOverLimitCacheBounded: the cache keeps at most its size; a full
// shard drops its expired denials when a new one comes, at most once a
// second; a denial whose call began before a forget is not kept.
func TestOverLimitCacheBounded(t *testing.T) {
	c := newOverLimit(32) // 16 shards of 2
	now := time.Now()
	deny := Decision{Decision: limiter.Decision{RetryAfter: time.Minute, Len: 1}}
	for i := range 1000 {
		c.put(fmt.Sprint("k", i), 1, 1, now, 0, deny)
	}
	if n := c.len(); n != 32 {
		t.Fatalf("%d keys kept, want 32", n)
	}
	later := now.Add(2 * time.Minute)
	c.put("new", 1, 1, later, 0, deny)
	if _, ok, _ := c.get("new", 1, 1, later); !ok {
		t.Fatal("a new denial was not kept after the old ones expired")
	}
	if n := c.len(); n > 32 {
		t.Fatalf("%d keys kept, want at most 32", n)
	}
	long := string(make([]byte, maxCachedKey+1))
	c.put(long, 1, 1, later, 0, deny)
	if _, ok, _ := c.get(long, 1, 1, later); ok {
		t.Fatal("a key longer than maxCachedKey was kept")
	}
	// a forget between a call's start and its denial: the denial is not kept
	_, _, epoch := c.get("raced", 1, 1, later)
	c.forget("raced")
	c.put("raced", 1, 1, later, epoch, deny)
	if _, ok, _ := c.get("raced", 1, 1, later); ok {
		t.Fatal("a denial decided before a reset was kept")
	}
}
