package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultMaxBatch is the most scripts a Batcher sends in one round trip,
// when BatcherConfig.MaxBatch is 0; the rest wait for the next.
const DefaultMaxBatch = 128

// BatcherConfig is a Batcher's configuration.
type BatcherConfig struct {
	// MaxBatch is the most scripts sent in one pipeline. 1 (or negative):
	// none, every call is sent at once, alone, even while others are in
	// the air (each on a connection of the client's pool). Default:
	// DefaultMaxBatch.
	MaxBatch int
	// Counters, if set, is where the Batcher counts its traffic; several
	// may share one. Default: the Batcher's own.
	Counters *BatchCounters
}

// BatchCounters count a Batcher's traffic, for metrics; several Batchers
// may share one.
type BatchCounters struct {
	// RoundTrips is the writes sent to Redis, each read back whole: a
	// script sent alone or a pipeline of several (a pipeline's resend
	// after NOSCRIPT counts again).
	RoundTrips atomic.Uint64
	// Scripts is the script runs sent in them.
	Scripts atomic.Uint64
}

// A Batcher puts the scripts of concurrent calls on one client on the
// wire together: a call that finds the Batcher idle yields its thread
// once, so that the calls already runnable join it, and leaves with them
// in one pipeline, or alone at once with its own context if none came (no
// wait for a window, as without a Batcher); the calls that arrive while a
// send is in the air queue, and when it lands they leave together in one
// pipeline (up to BatcherConfig.MaxBatch), one write and one read for all
// of them, while the next ones queue. Redis runs each script alone, so
// every decision stays one atomic script run, exactly as if sent by
// itself; only the wire is shared.
//
// A queued call leaves when its context ends, with its context's error;
// if its deadline passed before its batch was sent it is not sent. A
// pipeline carries the latest deadline of its calls and none's
// cancellation (none of them waits past its own). On Redis Cluster the
// client's pipeline splits a batch by node, and sends to the nodes at
// once.
//
// One Batcher serves every Store on a client (Config.Batcher); it is
// safe for concurrent use and holds no goroutine while idle.
type Batcher struct {
	client redis.UniversalClient
	stats  *BatchCounters
	max    int // BatcherConfig.MaxBatch with its default; 1: no batching

	mu      sync.Mutex
	queue   []*batchCall
	sending bool // a call or a pipeline is in the air; arrivals queue
}

// NewBatcher returns a Batcher on client.
func NewBatcher(client redis.UniversalClient, cfg BatcherConfig) *Batcher {
	b := &Batcher{client: client, stats: cfg.Counters, max: max(cfg.MaxBatch, 1)}
	if b.stats == nil {
		b.stats = new(BatchCounters)
	}
	if cfg.MaxBatch == 0 {
		b.max = DefaultMaxBatch
	}
	return b
}

// Stats returns the counters the Batcher counts into.
func (b *Batcher) Stats() *BatchCounters { return b.stats }

// A script is a Lua script as a Batcher sends it: EVALSHA with its SHA1,
// or EVAL with its source after Redis answered NOSCRIPT. Its words are
// held as interface values, so that a call's command takes them without
// an allocation.
type script struct {
	src, sha any // strings
}

// newScript is the script of Lua source src.
func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(h[:])}
}

// The verbs of a batchCall's command, as interface values.
var verbEvalSha, verbEval any = "evalsha", "eval"

// batchCall is one script run waiting in a Batcher.
type batchCall struct {
	script *script
	// cmd is the whole command, ready for redis.NewCmd: "evalsha", the
	// script's SHA1, the number of keys, the keys, then ARGV (Store.call)
	cmd      []any
	deadline time.Time // zero: none
	breaker  *Breaker  // the calling Store's; nil: none
	gathered bool      // a coalesced call (see callN): a timeout is not held against Redis
	done     chan struct{}
	res      any // after done
	err      error
}

// run runs script on keys and args: at once if nothing is in the air,
// else in the next pipeline. It reports the outcome to breaker (nil:
// none) and wraps the error as finish does; a gathered call's timeout is
// not reported.
//
// A call that finds the Batcher idle first yields its thread once
// (runtime.Gosched): the calls of other requests that are already
// runnable reach the Batcher meanwhile and queue, and leave with it in
// one pipeline. Alone, it is sent at once, as before; on a busy server
// this is where batches grow (docs/redis.md).
func (b *Batcher) run(ctx context.Context, c *batchCall) (any, error) {
	if b.max == 1 {
		return b.alone(ctx, c)
	}
	b.mu.Lock()
	if b.sending {
		b.enqueue(ctx, c, false)
		b.mu.Unlock()
		return c.wait(ctx)
	}
	b.sending = true
	b.mu.Unlock()
	runtime.Gosched()
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.mu.Unlock()
		defer b.handOff()
		return b.alone(ctx, c)
	}
	b.enqueue(ctx, c, true) // it came first
	b.mu.Unlock()
	go b.drain()
	return c.wait(ctx)
}

// enqueue puts c in the queue, at its end or its front; b.mu is held.
func (b *Batcher) enqueue(ctx context.Context, c *batchCall, front bool) {
	c.deadline, _ = ctx.Deadline()
	c.done = make(chan struct{})
	if front {
		b.queue = slices.Insert(b.queue, 0, c)
	} else {
		b.queue = append(b.queue, c)
	}
}

// wait is a queued call's outcome, or ctx's error if ctx ends first.
func (c *batchCall) wait(ctx context.Context) (any, error) {
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// sent or not, it is not this caller's any more; its outcome
		// still reaches the breaker when the pipeline lands
		return nil, finish(nil, ctx.Err())
	}
}

// alone sends c by itself, with ctx.
func (b *Batcher) alone(ctx context.Context, c *batchCall) (any, error) {
	b.stats.RoundTrips.Add(1)
	b.stats.Scripts.Add(1)
	cmd := redis.NewCmd(ctx, c.cmd...)
	_ = b.client.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		c.withSource()
		cmd = redis.NewCmd(ctx, c.cmd...)
		_ = b.client.Process(ctx, cmd)
	}
	res, err := cmd.Result()
	if err := c.report(err); err != nil {
		return nil, err
	}
	return res, nil
}

// handOff is called when a send lands: the calls queued meanwhile leave
// in a goroutine of their own (the caller that sent goes back to its
// request), or the Batcher goes idle.
func (b *Batcher) handOff() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.sending = false
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.drain()
}

// drain sends the queue, b.max at a time, until it is empty.
func (b *Batcher) drain() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.max)
		if n == 0 {
			b.sending = false
			b.mu.Unlock()
			return
		}
		batch := make([]*batchCall, n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		b.send(batch)
	}
}

// send runs batch in one pipeline (a second one resends, with the
// script's source, the calls Redis answered NOSCRIPT), and hands each
// call its reply. Calls whose deadline has passed are not sent.
func (b *Batcher) send(batch []*batchCall) {
	now := time.Now()
	live := batch[:0:0]
	var deadline time.Time
	forever := false
	for _, c := range batch {
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			c.err = errQueuedLate
			close(c.done)
			continue
		}
		live = append(live, c)
		if c.deadline.IsZero() {
			forever = true
		} else if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !forever {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	cmds := b.pipeline(ctx, live)
	var again []*batchCall
	for i, c := range live {
		if noScript(cmds[i].Err()) {
			c.withSource()
			again = append(again, c)
			continue
		}
		c.deliver(cmds[i])
	}
	if len(again) > 0 {
		for i, cmd := range b.pipeline(ctx, again) {
			again[i].deliver(cmd)
		}
	}
}

// pipeline sends each call's command in one pipeline, and returns their
// replies.
func (b *Batcher) pipeline(ctx context.Context, calls []*batchCall) []*redis.Cmd {
	b.stats.RoundTrips.Add(1)
	b.stats.Scripts.Add(uint64(len(calls)))
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = redis.NewCmd(ctx, c.cmd...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // each cmd holds its own error
	return cmds
}

// noScript is whether err is Redis's NOSCRIPT: it does not hold the
// script (after a restart or SCRIPT FLUSH).
func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// withSource makes c's command EVAL with the script's source, to send
// again after NOSCRIPT (which loads the script for the EVALSHAs after).
func (c *batchCall) withSource() { c.cmd[0], c.cmd[1] = verbEval, c.script.src }

// errQueuedLate is a queued call's error when its deadline passed before
// its batch could be sent: it is not sent, and the breaker hears nothing
// (Redis did not fail).
var errQueuedLate = fmt.Errorf("redisstore: %w: the call's deadline passed before its batch could be sent: %w", ErrUnavailable, context.DeadlineExceeded)

// deliver hands c its reply.
func (c *batchCall) deliver(cmd *redis.Cmd) {
	c.res, c.err = cmd.Result()
	c.err = c.report(c.err)
	close(c.done)
}

// report tells c's breaker the outcome of its script run and wraps err.
func (c *batchCall) report(err error) error {
	if c.gathered && errors.Is(err, context.DeadlineExceeded) {
		return errGatheredLate(err)
	}
	return finish(c.breaker, err)
}
