package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newLeases is a Leases of max for t, on addr, node id node, its scripts
// on clk (nil: Redis's clock), closed when t ends.
func newLeases(t testing.TB, addr, node string, max int64, clk *fakeClock) *Leases {
	t.Helper()
	l, err := NewLeases(newClient(t, addr), LeaseConfig{Max: max, KeyPrefix: "test:" + strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()) + ":", NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		l.clock = clk.now
	}
	t.Cleanup(l.Close)
	return l
}

// TestLeasesExact: 3 nodes (Leases of their own, each on its own client)
// make 15 concurrent acquires of one key with max_concurrent 10: exactly
// 10 get a lease, the others are refused with the count; releasing 4 lets
// exactly 4 more in.
func TestLeasesExact(t *testing.T) {
	srv, _ := start(t)
	const max = 10
	nodes := []*Leases{newLeases(t, srv.Addr, "a", max, nil), newLeases(t, srv.Addr, "b", max, nil), newLeases(t, srv.Addr, "c", max, nil)}
	var mu sync.Mutex
	var held []*Lease
	var refused atomic.Int64
	var wg sync.WaitGroup
	for i := range max + 5 {
		wg.Go(func() {
			x, n, err := nodes[i%3].Acquire(context.Background(), "k")
			switch {
			case err != nil:
				t.Error(err)
			case x == nil:
				if n != max {
					t.Errorf("refused with %d in flight, want %d", n, max)
				}
				refused.Add(1)
			default:
				if n < 1 || n > max {
					t.Errorf("a lease with %d in flight", n)
				}
				mu.Lock()
				held = append(held, x)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(held) != max || refused.Load() != 5 {
		t.Fatalf("%d leases, %d refused; want %d, 5", len(held), refused.Load(), max)
	}
	ids := map[string]bool{}
	for _, x := range held {
		if ids[x.ID()] {
			t.Fatalf("lease id %s twice", x.ID())
		}
		ids[x.ID()] = true
	}
	ctx := context.Background()
	for _, x := range held[:4] {
		if err := x.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := x.Release(ctx); err != nil { // twice: harmless
			t.Fatal(err)
		}
	}
	if n, err := nodes[0].InFlight(ctx, "k"); err != nil || n != max-4 {
		t.Fatalf("in flight %d (%v), want %d", n, err, max-4)
	}
	got := 0
	for i := range 6 {
		if x, _, err := nodes[i%3].Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		} else if x != nil {
			got++
		}
	}
	if got != 4 {
		t.Fatalf("%d leases after 4 released, want 4", got)
	}
}

// TestLeasesExpire: a dead node's leases (never renewed) free themselves
// at their expiry, to the microsecond; a renewed lease lives a timeout
// from its renewal; a lease renewed too late is lost.
func TestLeasesExpire(t *testing.T) {
	srv, _ := start(t)
	clk := &fakeClock{t: t0}
	dead, live := newLeases(t, srv.Addr, "dead", 2, clk), newLeases(t, srv.Addr, "live", 2, clk)
	dead.Close() // its renewer is gone: the node crashed
	ctx := context.Background()
	for range 2 {
		if x, _, err := dead.Acquire(ctx, "k"); err != nil || x == nil {
			t.Fatalf("dead node's acquire: %v, %v", x, err)
		}
	}
	timeout := DefaultLeaseTimeout
	clk.set(t0.Add(timeout - time.Microsecond))
	if x, n, err := live.Acquire(ctx, "k"); err != nil || x != nil || n != 2 {
		t.Fatalf("1µs before expiry: %v, %d, %v; want refused at 2", x, n, err)
	}
	clk.set(t0.Add(timeout))
	x, n, err := live.Acquire(ctx, "k")
	if err != nil || x == nil || n != 1 {
		t.Fatalf("at expiry: %v, %d, %v; want a lease, 1 in flight", x, n, err)
	}
	// renewed at t0+timeout+30s: lives until t0+2×timeout+30s
	clk.set(t0.Add(timeout + 30*time.Second))
	if lost, err := live.RenewAll(ctx); err != nil || lost != 0 {
		t.Fatalf("RenewAll: %d lost, %v", lost, err)
	}
	clk.set(t0.Add(2*timeout + 30*time.Second - time.Microsecond))
	if n, err := live.InFlight(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("renewed lease: %d in flight (%v)", n, err)
	}
	clk.set(t0.Add(2*timeout + 30*time.Second))
	if lost, err := live.RenewAll(ctx); err != nil || lost != 1 || live.Live() != 0 {
		t.Fatalf("a renewal at expiry: %d lost, %d live, %v; want 1, 0", lost, live.Live(), err)
	}
	if n, err := live.InFlight(ctx, "k"); err != nil || n != 0 {
		t.Fatalf("after the lost lease: %d in flight (%v)", n, err)
	}
}

// TestLeasesRenewer: the renewer keeps a lease alive past its timeout on
// Redis's own clock (a timeout of 150 ms, renewed every 50 ms: this test
// waits in real time, 500 ms).
func TestLeasesRenewer(t *testing.T) {
	srv, c := start(t)
	l, err := NewLeases(newClient(t, srv.Addr), LeaseConfig{Max: 1, Timeout: 150 * time.Millisecond, KeyPrefix: "test:renewer:"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	x, _, err := l.Acquire(ctx, "k")
	if err != nil || x == nil {
		t.Fatal(x, err)
	}
	time.Sleep(500 * time.Millisecond) // three timeouts: only renewals keep it
	if n, err := l.InFlight(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("in flight %d (%v), want 1", n, err)
	}
	// Closed with a lease live (a reload while a request runs): the
	// renewer goes on until the lease is released, then ends.
	l.Close()
	time.Sleep(500 * time.Millisecond)
	if n, err := l.InFlight(ctx, "k"); err != nil || n != 1 {
		t.Fatalf("after Close, in flight %d (%v), want 1: the live lease is still renewed", n, err)
	}
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, "test:renewer:{k}:lease").Result(); n != 0 {
		t.Fatal("the lease set outlived its last lease")
	}
	select {
	case <-l.done:
	case <-time.After(time.Second): // a renewal tick is 50 ms
		t.Fatal("the renewer outlived its last lease after Close")
	}
}

// TestLeasesBreaker: with Redis gone, Acquire fails with ErrUnavailable,
// then fast through the breaker, without a call.
func TestLeasesBreaker(t *testing.T) {
	srv, _ := start(t)
	l := newLeases(t, srv.Addr, "n", 1, nil)
	srv.Kill()
	ctx := context.Background()
	for range 3 {
		if _, _, err := l.Acquire(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Acquire without Redis: %v", err)
		}
	}
	if st := l.breaker.Stats(); st.Failures != 1 || st.FastFails != 2 {
		t.Fatalf("breaker %+v: want 1 failure, 2 fast fails", st)
	}
}

// TestLeaseConfig: NewLeases refuses what it cannot keep.
func TestLeaseConfig(t *testing.T) {
	_, c := start(t)
	for i, cfg := range []LeaseConfig{{}, {Max: 1, Timeout: time.Millisecond}, {Max: 1, Timeout: 1500 * time.Microsecond * 3}, {Max: 1, KeyPrefix: "{"}} {
		if _, err := NewLeases(c, cfg); err == nil {
			t.Errorf("Test %d: %+v: no error", i, cfg)
		}
	}
}
