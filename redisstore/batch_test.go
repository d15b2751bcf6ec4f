package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestBatchedExact: the exactness run (64 goroutines, 5000 attempts on
// one key limited to 1000 an hour) with every Store on one client and one
// Batcher: exactly 1000 pass on every algorithm, each attempt is one
// script, and they went in fewer round trips than attempts. The scripts
// are loaded first (a pipeline that reaches Redis before its script is
// sent again with the source: TestBatchNoScript).
func TestBatchedExact(t *testing.T) {
	_, c := start(t)
	for _, algo := range algorithms {
		t.Run(string(algo), func(t *testing.T) {
			var wire BatchCounters
			cfg := config(algo, limiter.Limit{Count: limit, Window: time.Hour})
			cfg.Batcher = NewBatcher(c, BatcherConfig{Counters: &wire})
			loadScripts(t, c, newStore(t, c, cfg))
			hammer(t, func() *Store { return newStore(t, c, cfg) })
			trips, scripts := wire.RoundTrips.Load(), wire.Scripts.Load()
			t.Logf("%d scripts in %d round trips", scripts, trips)
			if scripts != attempts || trips >= attempts {
				t.Fatalf("%d scripts in %d round trips; want %d scripts in fewer", scripts, trips, attempts)
			}
		})
	}
}

// TestBatchAlone: a call that finds the Batcher idle is sent at once,
// alone (a round trip of its own), and so is every call of a Batcher
// with MaxBatch 1, however many are in the air.
func TestBatchAlone(t *testing.T) {
	_, c := start(t)
	var wire BatchCounters
	cfg := config(limiter.SlidingWindow, hour)
	cfg.Batcher = NewBatcher(c, BatcherConfig{Counters: &wire})
	s := newStore(t, c, cfg)
	for i := range 3 {
		if d := allow(t, s, "k", 1); !d.Allowed || d.Quotas[0].Remaining != 9-int64(i) {
			t.Fatalf("request %d: %+v", i+1, d)
		}
	}
	if trips, scripts := wire.RoundTrips.Load(), wire.Scripts.Load(); trips != 3 || scripts != 3 {
		t.Fatalf("3 calls one after the other: %d scripts in %d round trips, want 3 in 3", scripts, trips)
	}
	var alone BatchCounters
	cfg.Batcher = NewBatcher(c, BatcherConfig{MaxBatch: 1, Counters: &alone})
	cfg.KeyPrefix = "test:alone:"
	s = newStore(t, c, cfg)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { allow(t, s, "k", 0) })
	}
	wg.Wait()
	if trips, scripts := alone.RoundTrips.Load(), alone.Scripts.Load(); trips != 32 || scripts != 32 {
		t.Fatalf("MaxBatch 1, 32 calls at once: %d scripts in %d round trips, want 32 in 32", scripts, trips)
	}
}

// TestBatchNoScript: a pipeline sent to a Redis that lost its scripts
// (SCRIPT FLUSH, as after a restart) is answered NOSCRIPT for every call;
// they are sent again with the script's source, in one more round trip,
// and each is decided once.
func TestBatchNoScript(t *testing.T) {
	_, c := start(t)
	var wire BatchCounters
	cfg := config(limiter.FixedWindow, limiter.Limit{Count: 5, Window: time.Hour})
	b := NewBatcher(c, BatcherConfig{Counters: &wire})
	cfg.Batcher = b
	s := newStore(t, c, cfg)
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	batch := make([]*batchCall, 8)
	for i := range batch {
		batch[i] = s.call("k", "a", 1, 1, 1, false)
		batch[i].deadline = time.Now().Add(5 * time.Second)
		batch[i].done = make(chan struct{})
	}
	b.send(batch)
	allowed := 0
	for i, bc := range batch {
		<-bc.done
		if bc.err != nil {
			t.Fatalf("call %d: %v", i, bc.err)
		}
		if bc.res.([]any)[0].(int64) == 1 {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("%d of 8 allowed, want 5", allowed)
	}
	if trips, scripts := wire.RoundTrips.Load(), wire.Scripts.Load(); trips != 2 || scripts != 16 {
		t.Fatalf("%d scripts in %d round trips, want 16 in 2 (the pipeline, then again with the source)", scripts, trips)
	}
	if d := allow(t, s, "k", 1); d.Allowed || d.Quotas[0].Remaining != 0 {
		t.Fatalf("the sixth: %+v", d)
	}
}

// TestBatchRedisStopped: 32 goroutines call through one Batcher, with
// deadlines of 50 and 200 ms in turn, and Redis is stopped (SIGSTOP) while
// a pipeline is in the air with calls queued behind it: every call ends
// within its own deadline (plus scheduling slack on this shared machine),
// none hangs, each failure wraps ErrUnavailable, and the breaker opens.
// Each goroutine stops at its first failure after the stop (the breaker
// then fails the rest fast: spinning on it would only starve the timers).
// Redis continued, calls succeed again after the probe interval.
func TestBatchRedisStopped(t *testing.T) {
	srv, c := start(t)
	cfg := config(limiter.TokenBucket, limiter.Limit{Count: 1_000_000_000, Window: time.Hour})
	cfg.ProbeInterval = 100 * time.Millisecond
	b := NewBatcher(c, BatcherConfig{})
	cfg.Batcher = b
	s := newStore(t, c, cfg)
	allow(t, s, "k", 1) // loads the script
	const slack = 300 * time.Millisecond
	var stop, paused atomic.Bool
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 32 {
		deadline := []time.Duration{50 * time.Millisecond, 200 * time.Millisecond}[w%2]
		wg.Go(func() {
			for !stop.Load() {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				_, err := s.Allow(ctx, fmt.Sprint("k", w), 1)
				cancel()
				if took := time.Since(t0); took > deadline+slack {
					t.Errorf("a call with a deadline of %s took %s", deadline, took)
				}
				if err != nil && !errors.Is(err, ErrUnavailable) {
					t.Errorf("error without ErrUnavailable: %v", err)
				}
				if err != nil && paused.Load() {
					failed.Add(1)
					return // its call in the air or queued at the stop has ended: done
				}
			}
		})
	}
	t.Cleanup(srv.Resume)
	for range 5000 {
		b.mu.Lock()
		if b.sending && len(b.queue) > 0 {
			srv.Pause() // under the lock: the pipeline is in the air, calls queued behind it
			paused.Store(true)
		}
		b.mu.Unlock()
		if paused.Load() {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if !paused.Load() {
		stop.Store(true)
		wg.Wait()
		t.Fatal("never saw calls queued behind a pipeline")
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		stop.Store(true)
		t.Fatalf("%d of 32 callers ended 5 s after Redis stopped: one hangs", failed.Load())
	}
	// A caller that gave up at its deadline reports nothing; its call's
	// pipeline does, when that pipeline's own (latest) deadline passes:
	// the breaker opens then, once the Batcher is idle again.
	for idle := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		sending := b.sending
		b.mu.Unlock()
		if !sending {
			break
		}
		if time.Now().After(idle) {
			t.Fatal("the Batcher still sending 5 s after every caller ended")
		}
	}
	if failed.Load() != 32 || s.Breaker().State() == Closed {
		t.Fatalf("Redis stopped: %d of 32 callers failed, breaker %s", failed.Load(), s.Breaker().State())
	}
	t.Logf("Redis stopped: each of %d callers failed, breaker %s, %+v", failed.Load(), s.Breaker().State(), s.Breaker().Stats())
	srv.Resume()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.Allow(ctx, "k", 1)
		cancel()
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("Redis continued: still failing: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBatchedCluster: on a Redis Cluster of three masters, 32 goroutines
// share one Batcher over 12 keys (on every master), each key limited to
// 20 an hour, 60 attempts each: exactly 20 of each key pass, in fewer
// round trips than attempts (the client splits each pipeline by node; a
// master that has not seen the script yet answers NOSCRIPT, and its calls
// are sent again with the source).
func TestBatchedCluster(t *testing.T) {
	c := startCluster(t)
	var wire BatchCounters
	cfg := config(limiter.SlidingWindow, limiter.Limit{Count: 20, Window: time.Hour})
	cfg.Batcher = NewBatcher(c, BatcherConfig{Counters: &wire})
	s := newStore(t, c, cfg)
	const keys, each = 12, 60
	var next atomic.Int64
	var mu sync.Mutex
	passed := make(map[string]int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= keys*each; i = next.Add(1) {
				key := fmt.Sprint("key", i%keys)
				if allow(t, s, key, 1).Allowed {
					mu.Lock()
					passed[key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if key := fmt.Sprint("key", i); passed[key] != 20 {
			t.Errorf("%s: %d passed, want 20", key, passed[key])
		}
	}
	trips, scripts := wire.RoundTrips.Load(), wire.Scripts.Load()
	t.Logf("%d scripts in %d round trips", scripts, trips)
	if scripts < keys*each || trips >= keys*each {
		t.Fatalf("%d scripts in %d round trips; want at least %d, in fewer", scripts, trips, keys*each)
	}
}
