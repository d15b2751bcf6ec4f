package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// TestBreakerStates walks a Breaker through its states.
func TestBreakerStates(t *testing.T) {
	b := NewBreaker(50 * time.Millisecond)
	if !b.Allow() || b.State() != Closed {
		t.Fatal("a new breaker is not closed")
	}
	b.Failure()
	if b.State() != Open || b.Allow() {
		t.Fatal("a failure did not open the breaker")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !b.Allow() {
		if time.Now().After(deadline) {
			t.Fatal("no probe after the interval")
		}
		time.Sleep(5 * time.Millisecond) // poll
	}
	if b.State() != Probing || b.Allow() {
		t.Fatal("a second call went through while probing")
	}
	b.Success()
	if b.State() != Closed || !b.Allow() {
		t.Fatal("a successful probe did not close the breaker")
	}
	st := b.Stats()
	if st.Failures != 1 || st.Probes != 1 || st.Opened != 1 || st.Closed != 1 || st.FastFails < 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRedisDown: with Redis killed, a call fails within its deadline, the
// breaker then fails calls fast without dialing and probes once per
// interval; when Redis comes back, calls succeed after the next probe.
func TestRedisDown(t *testing.T) {
	const interval = 300 * time.Millisecond
	srv := redistest.Start(t)
	c := newClient(t, srv.Addr)
	var sent atomic.Int64 // commands the client sent or tried to
	c.AddHook(countHook{&sent})
	s := newStore(t, c, Config{Limits: []limiter.Limit{hour}, ProbeInterval: interval})
	call := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := s.Allow(ctx, "k", 1)
		return err
	}
	if err := call(time.Second); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	const timeout = 200 * time.Millisecond
	start := time.Now()
	err := call(timeout)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Redis down: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > timeout+time.Second {
		t.Fatalf("the failing call took %s, deadline %s", took, timeout)
	}
	if s.Breaker().State() != Open {
		t.Fatalf("breaker %s after a failure", s.Breaker().State())
	}

	before, sentBefore := s.Breaker().Stats(), sent.Load()
	start = time.Now()
	for range 1000 {
		if err := call(timeout); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("breaker open: %v", err)
		}
	}
	took := time.Since(start)
	after := s.Breaker().Stats()
	probes := after.Probes - before.Probes
	if commands := sent.Load() - sentBefore; commands > int64(probes)*2 {
		t.Fatalf("%d commands sent for %d probes", commands, probes) // a probe is EVALSHA, at most EVAL too
	}
	if took > time.Second || after.FastFails-before.FastFails < 1000-probes {
		t.Fatalf("1000 calls with the breaker open took %s, %d failed fast", took, after.FastFails-before.FastFails)
	}

	// Over ~1 s down, about one probe per interval.
	before = s.Breaker().Stats()
	start = time.Now()
	for time.Since(start) < time.Second {
		_ = call(timeout)
		time.Sleep(time.Millisecond) // a request stream, not a wait
	}
	probes = s.Breaker().Stats().Probes - before.Probes
	if probes < 1 || probes > uint64(time.Second/interval)+2 {
		t.Fatalf("%d probes in 1s at one per %s", probes, interval)
	}

	srv.Restart() // same address, empty, no script loaded
	deadline := time.Now().Add(10 * time.Second)
	for call(time.Second) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("calls still fail after restart: breaker %+v", s.Breaker().Stats())
		}
		time.Sleep(10 * time.Millisecond) // a request stream, not a wait
	}
	if st := s.Breaker().Stats(); st.State != Closed || st.Closed < 1 {
		t.Fatalf("after recovery: %+v", st)
	}
}

// countHook counts the commands a client sends (or tries to).
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestTimeout: a Redis that does not answer (CLIENT PAUSE) fails a call
// within its deadline, as ErrUnavailable.
func TestTimeout(t *testing.T) {
	_, c := start(t)
	s := newStore(t, c, Config{Limits: []limiter.Limit{hour}, ProbeInterval: -1})
	allow(t, s, "k", 1)
	admin := newClient(t, c.Options().Addr)
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "500", "ALL").Err(); err != nil {
		t.Skipf("CLIENT PAUSE: %v", err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "CLIENT", "UNPAUSE") })
	const timeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := s.Allow(ctx, "k", 1)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("paused Redis: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > timeout+900*time.Millisecond {
		t.Fatalf("took %s with a deadline of %s", took, timeout)
	}
}
