package redisstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// maxFlight is the most requests one call decides: a request that finds
// the flight gathering behind a call full makes a call of its own.
const maxFlight = 64

// flightKey is what requests must share to ride in one call: the key,
// the cost and the scale (the script decides one cost at one scale; a
// scale is never NaN here).
type flightKey struct {
	key   string
	cost  int64
	scale float64
}

// A flight is one call deciding n requests of a flightKey. While it is in
// the air, requests of the same flightKey gather in next; when it lands,
// next takes off in a goroutine of its own, with the earliest deadline of
// its requests and no one's cancellation: no request of a flight depends
// on another's client staying.
type flight struct {
	n        int       // requests in it; fixed once it takes off
	next     *flight   // gathering behind this one; nil: none yet
	start    time.Time // when it took off
	deadline time.Time // the earliest of its requests' deadlines; zero: none
	landed   chan struct{}
	ds       []Decision // after landed: up to n, ending at a denial
	err      error
}

// decision is the decision of the i-th request of a landed flight: the
// requests past the first denial get that denial (the state was the same),
// without its Block.Started (one request started the block).
func (f *flight) decision(i int) (Decision, error) {
	if f.err != nil {
		return Decision{}, f.err
	}
	d := f.ds[min(i, len(f.ds)-1)]
	if i >= len(f.ds) {
		d.Block.Started = false
	}
	return d, nil
}

// errLate is a gathered flight's error when its earliest deadline passed
// before the call ahead of it landed: it is not sent, and the breaker
// hears nothing (Redis did not fail).
var errLate = fmt.Errorf("redisstore: %w: a coalesced call's deadline passed before it could be sent: %w", ErrUnavailable, context.DeadlineExceeded)

// A coalescer turns the concurrent requests of one key into as few calls
// as one at a time: the first request calls at once (no added wait), and
// those arriving during its call go together in the next, if waiting for
// it fits in their deadline. A key with one request at a time is never
// delayed.
type coalescer struct {
	seed   maphash.Seed
	rtt    atomic.Int64 // a moving average of a call's duration (ns): the wait a request can expect
	shards [64]flightShard
}

type flightShard struct {
	mu      sync.Mutex
	flights map[flightKey]*flight // the flight in the air, per key
}

func newCoalescer() *coalescer {
	c := &coalescer{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].flights = make(map[flightKey]*flight)
	}
	return c
}

func (c *coalescer) shardOf(key string) *flightShard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

// callN decides n requests of a key in one call. gathered is set for a
// flight that waited for the call ahead of it: its deadline was partly
// spent waiting, so a timeout says less about Redis.
type callN func(ctx context.Context, k flightKey, n int, gathered bool) ([]Decision, error)

// allow decides one request of k: in a call of its own, at once, when no
// call for k is in the air (or the flight gathering behind it is full, or
// waiting for it would not leave two calls' time before ctx's deadline);
// else in the flight gathering behind the call in the air.
func (c *coalescer) allow(ctx context.Context, k flightKey, call callN) (Decision, error) {
	sh := c.shardOf(k.key)
	sh.mu.Lock()
	f := sh.flights[k]
	if f == nil {
		f = &flight{n: 1, start: time.Now()}
		sh.flights[k] = f
		sh.mu.Unlock()
		ds, err := call(ctx, k, 1, false)
		c.observe(f.start, err)
		c.land(sh, k, f, call)
		if err != nil {
			return Decision{}, err
		}
		return ds[0], nil
	}
	next := f.next
	if (next != nil && next.n >= maxFlight) || !c.worthWaiting(ctx, f) {
		sh.mu.Unlock()
		ds, err := call(ctx, k, 1, false)
		if err != nil {
			return Decision{}, err
		}
		return ds[0], nil
	}
	if next == nil {
		next = &flight{landed: make(chan struct{})}
		f.next = next
	}
	i := next.n
	next.n++
	if dl, ok := ctx.Deadline(); ok && (next.deadline.IsZero() || dl.Before(next.deadline)) {
		next.deadline = dl
	}
	sh.mu.Unlock()
	select {
	case <-next.landed:
		return next.decision(i)
	case <-ctx.Done():
		return Decision{}, ctx.Err() // its slot is decided all the same
	}
}

// worthWaiting is whether a request with ctx's deadline can wait for f to
// land and then for its own flight, with as much again to spare, by the
// calls' recent duration. Without a deadline, or a duration yet, it can.
func (c *coalescer) worthWaiting(ctx context.Context, f *flight) bool {
	rtt := time.Duration(c.rtt.Load())
	dl, ok := ctx.Deadline()
	if rtt == 0 || !ok {
		return true
	}
	inAir := max(rtt-time.Since(f.start), 0)
	return time.Until(dl) >= inAir+2*rtt
}

// observe adds a call's duration to the average, if it succeeded or
// timed out (a timeout's duration is a lower bound). The average rises at
// once and falls slowly, so that a Redis turning slow stops requests from
// waiting for each other within a call.
func (c *coalescer) observe(start time.Time, err error) {
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	d := int64(time.Since(start))
	if old := c.rtt.Load(); d < old {
		d = old - old/8 + d/8
	}
	c.rtt.Store(d)
}

// land takes f off its key; the flight gathered behind it, if any, takes
// off.
func (c *coalescer) land(sh *flightShard, k flightKey, f *flight, call callN) {
	sh.mu.Lock()
	next := f.next
	if next != nil {
		next.start = time.Now()
		sh.flights[k] = next // from now on, arrivals gather behind next: its n is fixed
	} else {
		delete(sh.flights, k)
	}
	sh.mu.Unlock()
	if next != nil {
		go c.fly(sh, k, next, call)
	}
}

// fly makes a gathered flight's call, by its earliest deadline, and lands
// it.
func (c *coalescer) fly(sh *flightShard, k flightKey, f *flight, call callN) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !f.deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, f.deadline)
	}
	if ctx.Err() != nil {
		f.err = errLate
	} else {
		f.ds, f.err = call(ctx, k, f.n, true)
		c.observe(f.start, f.err)
	}
	cancel()
	close(f.landed)
	c.land(sh, k, f, call)
}
