package redisstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is where a Breaker stands.
type BreakerState int32

// The states of a Breaker.
const (
	// Closed: calls go to Redis.
	Closed BreakerState = iota
	// Open: calls fail fast with ErrUnavailable, without touching Redis,
	// until the probe interval has passed.
	Open
	// Probing: one call is testing Redis; the others fail fast.
	Probing
)

// String names s as metrics and logs show it.
func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case Probing:
		return "probing"
	}
	return "unknown"
}

// BreakerStats are a Breaker's counters since it was made, for metrics.
type BreakerStats struct {
	State     BreakerState
	Failures  uint64 // calls that failed for want of Redis (timeout, refused, down)
	FastFails uint64 // calls refused without touching Redis
	Probes    uint64 // calls let through to test a Redis that had failed
	Opened    uint64 // changes to Open (from Closed or from a failed probe)
	Closed    uint64 // changes back to Closed (a probe, or any call, succeeded)
}

// Breaker is a circuit breaker in front of Redis: after a call fails for
// want of Redis, calls fail fast for Interval, then one call probes Redis;
// its success closes the breaker, its failure opens it for another
// Interval. A dead Redis thus costs one timeout per Interval, not one per
// request. A probe that never reports (its caller had no deadline) is given
// up after Interval, and another call probes.
//
// The closed path is one atomic load. A Breaker is safe for concurrent use;
// its zero value is not usable: make one with NewBreaker.
type Breaker struct {
	interval time.Duration

	state atomic.Int32
	mu    sync.Mutex
	next  time.Time // Open: when the next probe may go; Probing: when the probe is given up

	failures, fastFails, probes, opened, closed atomic.Uint64
}

// NewBreaker returns a closed Breaker that probes every interval (at
// least 1 ms).
func NewBreaker(interval time.Duration) *Breaker {
	return &Breaker{interval: max(interval, time.Millisecond)}
}

// Allow reports whether a call may go to Redis now. When it returns true
// the caller must report the outcome with Success or Failure.
func (b *Breaker) Allow() bool {
	if BreakerState(b.state.Load()) == Closed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case Closed:
		return true
	case Open, Probing:
		now := time.Now()
		if now.Before(b.next) {
			b.fastFails.Add(1)
			return false
		}
		b.state.Store(int32(Probing))
		b.next = now.Add(b.interval)
		b.probes.Add(1)
		return true
	}
	return false
}

// Success reports that a call reached Redis: the breaker closes.
func (b *Breaker) Success() {
	if BreakerState(b.state.Load()) == Closed {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if BreakerState(b.state.Load()) != Closed {
		b.state.Store(int32(Closed))
		b.closed.Add(1)
	}
}

// Failure reports that a call failed for want of Redis: a closed breaker
// or a failed probe opens the breaker for another interval. Failures of
// calls made before it opened change nothing more.
func (b *Breaker) Failure() {
	b.failures.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch BreakerState(b.state.Load()) {
	case Closed, Probing:
		b.state.Store(int32(Open))
		b.next = time.Now().Add(b.interval)
		b.opened.Add(1)
	}
}

// State is where the breaker stands now.
func (b *Breaker) State() BreakerState { return BreakerState(b.state.Load()) }

// Stats returns the breaker's counters.
func (b *Breaker) Stats() BreakerStats {
	return BreakerStats{
		State:     b.State(),
		Failures:  b.failures.Load(),
		FastFails: b.fastFails.Load(),
		Probes:    b.probes.Load(),
		Opened:    b.opened.Load(),
		Closed:    b.closed.Load(),
	}
}
