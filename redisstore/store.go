package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is in the chain of every error that means Redis could not
// decide: the breaker is open, or the call timed out, was refused or met
// a Redis that is loading, read-only or without a cluster. The caller
// applies its on_store_error policy (fail open, fail closed, or decide
// locally) when errors.Is(err, ErrUnavailable). Other errors are bugs or
// misconfiguration (a key of another type under the prefix, say).
var ErrUnavailable = errors.New("redis unavailable")

// Store keeps a rule's rate-limit state in Redis: one hash per key (and,
// for sliding_log, one ZSET per limit), changed only by one Lua script per
// algorithm, so every decision is atomic and exact however many callers
// share the Redis.
//
// Allow and Refund take their deadline from ctx: give each call a short
// one (the Caddy wiring will default to 50 ms), and a client with
// ContextTimeoutEnabled (so the deadline reaches reads) and MaxRetries -1
// (a retried script that had already run would take units twice). A Store
// is safe for concurrent use.
type Store struct {
	client  redis.UniversalClient
	script  *script
	allow   *script // one request's "a" for the simple configs (Config.allowScript); nil: script does all
	cfg     Config
	args    []any // ARGV from index 5 on, at scale 1
	prefix  string
	logs    int // ZSETs per key: the sliding log's limits
	longest time.Duration
	breaker *Breaker   // nil: none
	flights *coalescer // nil: Config.Coalesce off
	batch   *Batcher   // Config.Batcher, or one of the Store's own that never batches
	denied  *overLimit // nil: no over-limit cache
	now     func() time.Time
	stats   *Counters
	scaled  sync.Map     // scale → its arguments (argsAt)
	scales  atomic.Int64 // scales tried into scaled
	blocks  bool         // Config.BlockFor is set: the last Redis key is the block's
	// periods are the calendar limits (Config.Periods), nil without: each
	// call gives the script the periods around the Store's clock
	periods *periods
	// clock, if set, is the scripts' time instead of Redis's TIME: tests
	// only, to step time exactly
	clock func() time.Time
}

// New returns a Store for cfg on client, or cfg's validation error. It does
// not touch Redis: the script is loaded by the first call.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: no client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = append([]limiter.Limit(nil), cfg.Limits...)
	cfg.BlockFor = append([]time.Duration(nil), cfg.BlockFor...)
	s := &Store{client: client, cfg: cfg, script: newScript(cfg.script()), args: cfg.args(1), prefix: cfg.KeyPrefix, now: time.Now, blocks: len(cfg.BlockFor) > 0}
	if src := cfg.allowScript(); src != "" {
		s.allow = newScript(src)
	}
	s.stats = cfg.Counters
	s.batch = cfg.Batcher
	if s.batch == nil {
		s.batch = NewBatcher(client, BatcherConfig{MaxBatch: 1})
	}
	if s.stats == nil {
		s.stats = new(Counters)
	}
	if cfg.Coalesce {
		s.flights = newCoalescer()
	}
	if cfg.OverLimitCacheKeys > 0 {
		s.denied = newOverLimit(cfg.OverLimitCacheKeys)
	}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	if cfg.algorithm() == limiter.SlidingLog {
		s.logs = len(cfg.Limits)
	}
	for _, l := range cfg.Limits {
		s.longest = max(s.longest, l.Window)
	}
	s.periods = newPeriods(cfg)
	switch {
	case cfg.ProbeInterval == 0:
		s.breaker = NewBreaker(DefaultProbeInterval)
	case cfg.ProbeInterval > 0:
		s.breaker = NewBreaker(cfg.ProbeInterval)
	}
	return s, nil
}

// Config returns the configuration the Store was made with.
func (s *Store) Config() Config { return s.cfg }

// Breaker returns the Store's breaker, or nil if it has none.
func (s *Store) Breaker() *Breaker { return s.breaker }

// Allow decides whether key may take cost units now (Redis's clock), and
// takes them from every limit if so, in one round trip. A cost of 0 or
// less takes nothing and is allowed. The Decision is as limiter's: one
// Quota per limit, in the rule's order; Reset and RetryAfter in whole
// microseconds.
func (s *Store) Allow(ctx context.Context, key string, cost int64) (limiter.Decision, error) {
	return s.AllowScaled(ctx, key, cost, 1)
}

// AllowScaled is Allow with every limit and burst multiplied by scale, as
// limiter.AllowScaledAt applies it (rounded down, at least 1); a scale of
// 0 or less denies everything, without a call. The key's state is the same
// whatever the scale. With Config.OverLimitCacheKeys, a key Redis denied
// is denied again without a call until the denial's RetryAfter; with
// Config.Coalesce, concurrent requests of one key share calls. It is
// Decide without the block.
func (s *Store) AllowScaled(ctx context.Context, key string, cost int64, scale float64) (limiter.Decision, error) {
	d, err := s.Decide(ctx, key, cost, scale)
	return d.Decision, err
}

// Decide is AllowScaled with the key's block (Config.BlockFor): a key
// whose block is in force is denied (RetryAfter the block's rest, every
// Remaining 0) without taking units, and a denial starts the key's next
// block (Block.Started, RetryAfter at least its duration). One round trip,
// as without blocks.
func (s *Store) Decide(ctx context.Context, key string, cost int64, scale float64) (Decision, error) {
	if !(scale > 0) {
		return Decision{Decision: s.blocked()}, nil
	}
	var start time.Time
	var epoch uint64
	if s.denied != nil && cost > 0 {
		start = s.now()
		var d Decision
		var ok bool
		if d, ok, epoch = s.denied.get(key, cost, scale, start); ok {
			s.stats.OverLimitCached.Add(1)
			return d, nil
		}
	}
	var d Decision
	var err error
	if s.flights != nil && cost > 0 {
		d, err = s.flights.allow(ctx, flightKey{key, cost, scale}, s.allowN)
	} else {
		var one [1]Decision // on the stack: no allocation for the reply's decision
		var ds []Decision
		ds, err = s.allowInto(ctx, flightKey{key, cost, scale}, 1, false, one[:0])
		if err == nil {
			d = ds[0]
		}
	}
	if err == nil && !d.Allowed && s.denied != nil && cost > 0 {
		// Redis decided somewhere in the call: its middle is the best
		// guess of when the denial's RetryAfter began
		decided := start.Add(s.now().Sub(start) / 2)
		s.denied.put(key, cost, scale, decided, epoch, d)
	}
	return d, err
}

// allowN decides n requests of k in one call: the decisions up to and
// including the first denial. A gathered call (see callN) that times out
// is not held against Redis by the breaker.
func (s *Store) allowN(ctx context.Context, k flightKey, n int, gathered bool) ([]Decision, error) {
	return s.allowInto(ctx, k, n, gathered, nil)
}

// allowInto is allowN, its decisions in into's array if it has room.
func (s *Store) allowInto(ctx context.Context, k flightKey, n int, gathered bool, into []Decision) ([]Decision, error) {
	s.stats.Calls.Add(1)
	if n > 1 {
		s.stats.Coalesced.Add(uint64(n - 1))
	}
	return s.decide(ctx, k.key, "a", k.cost, n, k.scale, gathered, into)
}

// Peek is Allow without taking anything: what Allow would decide now (a
// blocked key is denied). It writes nothing (a sliding log's expired
// events stay until an admission, a denial starts no block), and neither
// reads nor fills the over-limit cache.
func (s *Store) Peek(ctx context.Context, key string, cost int64) (limiter.Decision, error) {
	var one [1]Decision
	ds, err := s.decide(ctx, key, "p", cost, 1, 1, false, one[:0])
	if err != nil {
		return limiter.Decision{}, err
	}
	return ds[0].Decision, nil
}

// Reset forgets key's state: its next request finds every limit whole,
// and its block, if any, is lifted with its offences (admin's DELETE of a
// key). It also forgets the key in this Store's over-limit cache (other
// processes keep theirs until their denial's RetryAfter).
func (s *Store) Reset(ctx context.Context, key string) error {
	if s.denied != nil {
		defer s.denied.forget(key) // after the call too: a denial decided before it landed is not kept
		s.denied.forget(key)
	}
	if s.breaker != nil && !s.breaker.Allow() {
		return fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	return s.done(s.client.Del(ctx, s.RedisKeys(key)...).Err())
}

// blocked is the decision at a scale of 0: nothing passes, and the
// longest window is the wait, as limiter's.
func (s *Store) blocked() limiter.Decision {
	d := limiter.Decision{RetryAfter: s.longest, Len: len(s.cfg.Limits)}
	for i, l := range s.cfg.Limits {
		d.Quotas[i] = limiter.Quota{Window: l.Window, Effective: l.Window}
	}
	return d
}

// decide runs the script for op "a" or "p" on n requests and reads its
// reply: at least one decision, at most n, in into's array if it has room.
func (s *Store) decide(ctx context.Context, key, op string, cost int64, n int, scale float64, gathered bool, into []Decision) ([]Decision, error) {
	res, err := s.run(ctx, key, op, cost, n, scale, gathered)
	if err != nil {
		return nil, err
	}
	v, ok := res.([]any)
	each := 4 + 2*len(s.cfg.Limits)
	if s.blocks {
		each += 3
	}
	if !ok || len(v) == 0 || len(v)%each != 0 || len(v)/each > n {
		return nil, fmt.Errorf("redisstore: unexpected reply %v", res)
	}
	ds := into[:0]
	if cap(ds) < len(v)/each {
		ds = make([]Decision, 0, len(v)/each)
	}
	var num [4 + 2*limiter.MaxLimits + 3]int64
	for row := range len(v) / each {
		for i, x := range v[row*each : (row+1)*each] {
			if num[i], ok = x.(int64); !ok {
				return nil, fmt.Errorf("redisstore: unexpected reply %v", res)
			}
		}
		ds = append(ds, Decision{})
		s.read(&ds[row], num[:each], scale)
	}
	return ds, nil
}

// read fills d from one decision of the script's reply.
func (s *Store) read(rd *Decision, n []int64, scale float64) {
	d := &rd.Decision
	d.Allowed = n[0] == 1
	rd.At = time.UnixMicro(n[3])
	d.RetryAfter = us(n[1])
	d.Delay = us(n[2])
	d.Len = len(s.cfg.Limits)
	for i, l := range s.cfg.Limits {
		d.Quotas[i] = limiter.Quota{Limit: limiter.ScaledCount(l.Count, scale), Window: s.window(i, n[3]), Remaining: max(n[4+2*i], 0), Reset: us(n[5+2*i])}
	}
	s.effective(d, scale)
	if s.blocks {
		b := n[4+2*len(s.cfg.Limits):]
		if b[0] > 0 {
			rd.Block.Until = time.UnixMicro(b[0])
		}
		rd.Block.Offences, rd.Block.Started = b[1], b[2] == 1
	}
}

// Refund gives back what an allowed decision took for key (t: its
// Decision's At, the units and the scale), when another rule denied the
// same request or its response took fewer units than it reserved. As
// limiter's Refund, the units go back only to the state they were taken
// from: fixed_window, if the window that held t.At is still the key's;
// sliding_window, to the count that holds them (the current, or the
// previous if the window has rolled once since), else nowhere;
// sliding_log, from the reservation's own event (the oldest at or after
// t.At), if it is still in the window; token_bucket and leaky_bucket, the
// TAT moves back by what the units cost less the refill since t.At, never
// before now. A Refund never creates a key. It forgets the key in the
// over-limit cache: units came back.
func (s *Store) Refund(ctx context.Context, key string, t limiter.Taken) error {
	if t.Cost <= 0 || !(t.Scale > 0) {
		return nil
	}
	if s.denied != nil {
		defer s.denied.forget(key)
		s.denied.forget(key)
	}
	_, err := s.run(ctx, key, "r", t.Cost, int(t.At.UnixMicro()), t.Scale, false)
	return err
}

// run calls the script through the breaker: EVALSHA, or EVAL when Redis
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), through the
// Store's Batcher.
func (s *Store) run(ctx context.Context, key, op string, cost int64, n int, scale float64, gathered bool) (any, error) {
	if s.breaker != nil && !s.breaker.Allow() {
		return nil, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	return s.batch.run(ctx, s.call(key, op, cost, n, scale, gathered))
}

// call is the script run of op on key, for n requests of cost at scale.
// Its command is built in one slice, of words that need no allocation of
// their own but the Redis key's (the hot path's allocations, docs/redis.md).
func (s *Store) call(key, op string, cost int64, n int, scale float64, gathered bool) *batchCall {
	rest, scaled := s.args, scaledNo
	if scale != 1 {
		rest, scaled = s.argsAt(scale), scaledYes
	}
	if s.periods != nil {
		rest = s.periods.withPeriods(rest, s.clockNow())
	}
	if op != "r" {
		n = max(n, 1)
	}
	sc := s.script
	if op == "a" && n == 1 && s.allow != nil {
		sc = s.allow
	}
	var keys []string // nil: the hash's alone
	if s.logs > 0 || s.blocks {
		keys = s.RedisKeys(key)
	}
	nkeys := max(len(keys), 1)
	cmd := make([]any, 0, 3+nkeys+5+len(rest))
	cmd = append(cmd, verbEvalSha, sc.sha, nkeys)
	if keys == nil {
		cmd = append(cmd, s.redisKey(key))
	}
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, opWord(op), min(max(cost, 0), limiter.MaxCount+1), n, scaled, s.clockArg())
	cmd = append(cmd, rest...)
	return &batchCall{script: sc, cmd: cmd, breaker: s.breaker, gathered: gathered}
}

// The script's op and scaled flag words, as interface values (see call).
var (
	opAllow, opPeek, opRefund, opCharge any = "a", "p", "r", "k"
	scaledNo, scaledYes                 any = "0", "1"
)

// opWord is op as an interface value.
func opWord(op string) any {
	switch op {
	case "a":
		return opAllow
	case "p":
		return opPeek
	case "r":
		return opRefund
	case "k":
		return opCharge
	}
	return op
}

// errGatheredLate wraps the timeout of a coalesced call (see callN): not
// held against Redis by the breaker.
func errGatheredLate(err error) error {
	return fmt.Errorf("redisstore: %w: a coalesced call: %w", ErrUnavailable, err)
}

// maxScales is how many scales' arguments a Store keeps: tiers and
// countries give a rule a few; past that, they are made per call.
const maxScales = 64

// argsAt is the script's arguments at scale (see Config.args), kept for
// the first maxScales scales.
func (s *Store) argsAt(scale float64) []any {
	if a, ok := s.scaled.Load(scale); ok {
		return a.([]any)
	}
	a := s.cfg.args(scale)
	if s.scales.Add(1) <= maxScales {
		s.scaled.Store(scale, a)
	}
	return a
}

// done reports a call's outcome to the breaker and wraps its error.
func (s *Store) done(err error) error { return finish(s.breaker, err) }

// finish reports a call's outcome to breaker (nil: none) and wraps its
// error.
func finish(breaker *Breaker, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		// the caller gave up: says nothing of Redis (a probe cut short is
		// retried after the interval)
		return fmt.Errorf("redisstore: %w", err)
	case err == nil:
		if breaker != nil {
			breaker.Success()
		}
		return nil
	case unavailable(err):
		if breaker != nil {
			breaker.Failure()
		}
		return fmt.Errorf("redisstore: %w: %w", ErrUnavailable, err)
	}
	if breaker != nil {
		breaker.Success() // Redis answered
	}
	return fmt.Errorf("redisstore: %w", err)
}

// unavailable is true for errors that mean Redis could not run the script:
// the network, a timeout, a server that is loading, read-only, busy or
// without a working cluster, or one (or a Sentinel) that refuses our
// credentials: every call would fail alike, so the breaker holds them off.
// A caller's cancellation is not Redis's fault.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // network, timeout, closed pool
	}
	for _, p := range []string{"LOADING", "READONLY", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "NOREPLICAS", "MOVED", "ASK", "NOAUTH", "WRONGPASS", "NOPERM"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// us converts microseconds to a Duration.
func us(n int64) time.Duration { return time.Duration(max(n, 0)) * time.Microsecond }
