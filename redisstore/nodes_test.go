package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newFleet is a Fleet on c under the test's own prefix.
func newFleet(t *testing.T, c redis.UniversalClient, ttl time.Duration, id string) *Fleet {
	t.Helper()
	f, err := NewFleet(c, FleetConfig{KeyPrefix: "test:" + t.Name() + ":", TTL: ttl, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// beat calls f.Beat with a deadline and fails the test on an error.
func beat(t *testing.T, f *Fleet) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := f.Beat(ctx)
	if err != nil {
		t.Fatalf("%s: Beat: %v", f.ID(), err)
	}
	if f.Nodes() != n {
		t.Fatalf("%s: Beat returned %d, Nodes %d", f.ID(), n, f.Nodes())
	}
	return n
}

// TestNodesCount: three nodes beat and each counts three; one leaves and
// the others count two at once; one stops beating and is forgotten after
// its TTL (not before: right after its last beat it still counts), while
// the others' long TTLs are not cut short by its short one. The last to
// leave takes the key with it.
func TestNodesCount(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	_, c := start(t)
	a := newFleet(t, c, 10*time.Second, "a")
	b := newFleet(t, c, 10*time.Second, "b")
	short := 500 * time.Millisecond
	d := newFleet(t, c, short, "d")
	if a.Nodes() != 1 {
		t.Fatalf("before any beat: Nodes %d, want 1", a.Nodes())
	}
	for i, f := range []*Fleet{a, b, d} {
		if n := beat(t, f); n != i+1 {
			t.Fatalf("beat %d (%s): %d nodes, want %d", i+1, f.ID(), n, i+1)
		}
	}
	for _, f := range []*Fleet{a, b, d} {
		if n := beat(t, f); n != 3 {
			t.Fatalf("%s after all beat: %d nodes, want 3", f.ID(), n)
		}
	}
	ctx := context.Background()
	if key := a.Key(); key != "test:TestNodesCount:{nodes}" {
		t.Errorf("key %q, want test:TestNodesCount:{nodes}", key)
	}
	members, err := c.ZRange(ctx, a.Key(), 0, -1).Result()
	if err != nil || strings.Join(members, ",") != "d,a,b" {
		t.Errorf("members %v (%v), want d (expiring first), a, b", members, err)
	}
	if ttl, err := c.PTTL(ctx, a.Key()).Result(); err != nil || ttl <= 9*time.Second || ttl > 10*time.Second {
		t.Errorf("PTTL of the set %s (%v), want the latest member's expiry, about 10s", ttl, err)
	}

	// one leaves: the others count two at once
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if n := beat(t, d); n != 2 {
		t.Fatalf("d after b left: %d nodes, want 2", n)
	}
	if n := beat(t, a); n != 2 {
		t.Fatalf("a after b left: %d nodes, want 2", n)
	}
	if b.Nodes() != 3 {
		t.Errorf("b after leaving: Nodes %d, want its last count, 3", b.Nodes())
	}

	// d stops beating: forgotten once its TTL has passed
	last := time.Now()
	var n int
	for deadline := last.Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a poll interval
		if n = beat(t, a); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("d still counted 10s after its last beat (TTL %s)", short)
		}
	}
	if took := time.Since(last); took < short-50*time.Millisecond { // Redis's clock and ours may differ by a few ms
		t.Errorf("d forgotten %s after its last beat, before its TTL %s", took, short)
	}

	// a beat after Leave joins again
	if n := beat(t, b); n != 2 {
		t.Errorf("b back: %d nodes, want 2", n)
	}
	for _, f := range []*Fleet{a, b} {
		if err := f.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.Exists(ctx, a.Key()).Result(); err != nil || n != 0 {
		t.Errorf("the set after every node left: exists %d (%v), want gone", n, err)
	}
}

// TestNodesPrefixes: fleets under different key prefixes on one Redis
// do not count each other.
func TestNodesPrefixes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	_, c := start(t)
	mk := func(prefix string) *Fleet {
		f, err := NewFleet(c, FleetConfig{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	x1, x2, y := mk("x:"), mk("x:"), mk("y:")
	beat(t, x1)
	beat(t, y)
	if n := beat(t, x2); n != 2 {
		t.Errorf("x2: %d nodes, want 2 (x1 and itself)", n)
	}
	if n := beat(t, y); n != 1 {
		t.Errorf("y: %d nodes, want 1", n)
	}
	if x1.ID() == x2.ID() || !strings.Contains(x1.ID(), ":") {
		t.Errorf("default ids %q and %q: want distinct host:pid:random", x1.ID(), x2.ID())
	}
	if def, _ := NewFleet(c, FleetConfig{}); def.Key() != DefaultKeyPrefix+FleetKey || def.TTL() != DefaultFleetTTL {
		t.Errorf("defaults: key %q, TTL %s", def.Key(), def.TTL())
	}
}

// TestNodesRedisDown: when Redis is away a beat fails within its
// deadline, wrapping ErrUnavailable, and the last count stays; when it is
// back (empty), the next beat counts afresh.
func TestNodesRedisDown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv, c := start(t)
	fleets := []*Fleet{newFleet(t, c, time.Second, "a"), newFleet(t, c, time.Second, "b"), newFleet(t, c, time.Second, "c")}
	for _, f := range fleets {
		beat(t, f)
	}
	a := fleets[0]
	if n := beat(t, a); n != 3 {
		t.Fatalf("%d nodes, want 3", n)
	}
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := a.Beat(ctx)
	if !errors.Is(err, ErrUnavailable) || n != 3 || a.Nodes() != 3 {
		t.Errorf("beat with Redis down: %d, %v; Nodes %d; want 3, ErrUnavailable, 3", n, err, a.Nodes())
	}
	if err := a.Leave(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("leave with Redis down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a poll interval
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := a.Beat(ctx)
		cancel()
		if err == nil {
			if n != 1 {
				t.Errorf("first beat on the restarted Redis: %d nodes, want 1", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("beat still failing 10s after Redis restarted: %v", err)
		}
	}
}

// TestNodesConfig: NewFleet refuses what would break the key or the TTL.
func TestNodesConfig(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for i, tc := range []struct {
		cfg  FleetConfig
		want string
	}{
		{FleetConfig{KeyPrefix: "a{b"}, "must not contain"},
		{FleetConfig{TTL: -time.Second}, "whole number of milliseconds"},
		{FleetConfig{TTL: 1500 * time.Microsecond}, "whole number of milliseconds"},
	} {
		if _, err := NewFleet(c, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Test %d: error %v, want %q", i, err, tc.want)
		}
	}
	if _, err := NewFleet(nil, FleetConfig{}); err == nil {
		t.Error("no client: no error")
	}
}
