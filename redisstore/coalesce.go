package redisstore

import (
	"context"
	"hash/maphash"
	"sync"

	"github.com/edgebyte/edgelimit/limiter"
)

// maxFlight is the most requests one call decides: a request that finds
// the batch behind a call full makes a call of its own.
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
// next takes off with the requests it gathered, led by the first of them.
type flight struct {
	n       int     // requests in it; fixed once it takes off
	next    *flight // gathering behind this one; nil: none yet
	takeoff chan struct{}
	landed  chan struct{}
	ds      []limiter.Decision // after landed: up to n, ending at a denial
	err     error
}

func newFlight() *flight {
	return &flight{n: 1, takeoff: make(chan struct{}), landed: make(chan struct{})}
}

// decision is the decision of the i-th request of a landed flight: the
// requests past the first denial get that denial (the state was the same).
func (f *flight) decision(i int) (limiter.Decision, error) {
	if f.err != nil {
		return limiter.Decision{}, f.err
	}
	return f.ds[min(i, len(f.ds)-1)], nil
}

// A coalescer turns the concurrent requests of one key into as few calls
// as one at a time: the first request calls at once (no added wait), and
// those arriving during its call go together in the next. A key with one
// request at a time is never delayed.
type coalescer struct {
	seed   maphash.Seed
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

// callN decides n requests of a key in one call.
type callN func(ctx context.Context, k flightKey, n int) ([]limiter.Decision, error)

// allow decides one request of k, in a call of its own or with others.
// The call of a flight runs with its leader's deadline (the earliest of
// its requests'), not its cancellation: it decides for the others too.
func (c *coalescer) allow(ctx context.Context, k flightKey, call callN) (limiter.Decision, error) {
	sh := c.shardOf(k.key)
	sh.mu.Lock()
	f := sh.flights[k]
	if f == nil {
		f = newFlight()
		close(f.takeoff)
		sh.flights[k] = f
		sh.mu.Unlock()
		return c.fly(ctx, sh, k, f, call)
	}
	next := f.next
	switch {
	case next == nil:
		next = newFlight()
		f.next = next
		sh.mu.Unlock()
		return c.lead(ctx, sh, k, f, next, call)
	case next.n >= maxFlight:
		sh.mu.Unlock()
		ds, err := call(ctx, k, 1)
		if err != nil {
			return limiter.Decision{}, err
		}
		return ds[0], nil
	}
	i := next.n
	next.n++
	sh.mu.Unlock()
	select {
	case <-next.landed:
		return next.decision(i)
	case <-ctx.Done():
		return limiter.Decision{}, ctx.Err()
	}
}

// lead waits for the flight in the air to land, then flies next, which
// gathered behind it. If the leader's own deadline passes first, next
// never flies: its requests get the error.
func (c *coalescer) lead(ctx context.Context, sh *flightShard, k flightKey, inAir, next *flight, call callN) (limiter.Decision, error) {
	select {
	case <-next.takeoff:
		return c.fly(ctx, sh, k, next, call)
	case <-ctx.Done():
	}
	sh.mu.Lock()
	select {
	case <-next.takeoff: // landed at the same moment: fly (it fails fast)
		sh.mu.Unlock()
		return c.fly(ctx, sh, k, next, call)
	default:
	}
	inAir.next = nil // arrivals gather behind inAir afresh
	sh.mu.Unlock()
	next.err = ctx.Err()
	close(next.landed)
	return limiter.Decision{}, next.err
}

// fly makes f's call, lands it, and sends off the flight behind it.
func (c *coalescer) fly(ctx context.Context, sh *flightShard, k flightKey, f *flight, call callN) (limiter.Decision, error) {
	callCtx, cancel := withDeadlineOf(ctx)
	sh.mu.Lock()
	n := f.n
	sh.mu.Unlock()
	f.ds, f.err = call(callCtx, k, n)
	cancel()
	sh.mu.Lock()
	if next := f.next; next != nil {
		sh.flights[k] = next
		close(next.takeoff)
	} else {
		delete(sh.flights, k)
	}
	sh.mu.Unlock()
	close(f.landed)
	return f.decision(0)
}

// withDeadlineOf is ctx without its cancellation but with its deadline.
func withDeadlineOf(ctx context.Context) (context.Context, context.CancelFunc) {
	free := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(free, dl)
	}
	return context.WithCancel(free)
}
