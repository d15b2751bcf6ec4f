package redisstore

import (
	"context"
	"errors"
	"fmt"
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
	script  *redis.Script
	cfg     Config
	args    []any // ARGV from index 3 on
	prefix  string
	logs    int // ZSETs per key: the sliding log's limits
	longest time.Duration
	breaker *Breaker // nil: none
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
	s := &Store{client: client, cfg: cfg, script: redis.NewScript(cfg.script()), args: cfg.args(), prefix: cfg.KeyPrefix}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	if cfg.algorithm() == limiter.SlidingLog {
		s.logs = len(cfg.Limits)
	}
	for _, l := range cfg.Limits {
		s.longest = max(s.longest, l.Window)
	}
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
	return s.decide(ctx, key, "a", cost)
}

// Peek is Allow without taking anything: what Allow would decide now. It
// writes nothing (a sliding log's expired events stay until an admission).
func (s *Store) Peek(ctx context.Context, key string, cost int64) (limiter.Decision, error) {
	return s.decide(ctx, key, "p", cost)
}

// Reset forgets key's state: its next request finds every limit whole.
func (s *Store) Reset(ctx context.Context, key string) error {
	if s.breaker != nil && !s.breaker.Allow() {
		return fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	return s.done(s.client.Del(ctx, s.RedisKeys(key)...).Err())
}

// decide runs the script for op "a" or "p" and reads its reply.
func (s *Store) decide(ctx context.Context, key, op string, cost int64) (limiter.Decision, error) {
	var d limiter.Decision
	res, err := s.run(ctx, key, op, cost)
	if err != nil {
		return d, err
	}
	v, ok := res.([]any)
	if !ok || len(v) != 4+2*len(s.cfg.Limits) {
		return d, fmt.Errorf("redisstore: unexpected reply %v", res)
	}
	n := make([]int64, len(v))
	for i, x := range v {
		if n[i], ok = x.(int64); !ok {
			return d, fmt.Errorf("redisstore: unexpected reply %v", res)
		}
	}
	d.Allowed = n[0] == 1
	d.RetryAfter = us(n[1])
	d.Delay = us(n[2])
	d.Len = len(s.cfg.Limits)
	for i, l := range s.cfg.Limits {
		d.Quotas[i] = limiter.Quota{Limit: l.Count, Window: l.Window, Remaining: max(n[4+2*i], 0), Reset: us(n[5+2*i])}
	}
	return d, nil
}

// Refund gives back cost units that Allow took for key moments ago (when
// another rule denied the same request). What comes back: fixed_window,
// the units if the window they were taken in is still the current one;
// sliding_window, the units from the current count, or the previous one if
// the window just rolled over; sliding_log, the newest events' units;
// token_bucket and leaky_bucket, the TAT moves back by their cost, never
// before now. A Refund never creates a key.
func (s *Store) Refund(ctx context.Context, key string, cost int64) error {
	if cost <= 0 {
		return nil
	}
	_, err := s.run(ctx, key, "r", cost)
	return err
}

// run calls the script through the breaker: EVALSHA, or EVAL when Redis
// answers NOSCRIPT (after a restart or SCRIPT FLUSH).
func (s *Store) run(ctx context.Context, key, op string, cost int64) (any, error) {
	if s.breaker != nil && !s.breaker.Allow() {
		return nil, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	args := make([]any, 0, 2+len(s.args))
	args = append(args, op, min(max(cost, 0), limiter.MaxCount+1))
	args = append(args, s.args...)
	res, err := s.script.Run(ctx, s.client, s.RedisKeys(key), args...).Result()
	if err := s.done(err); err != nil {
		return nil, err
	}
	return res, nil
}

// done reports a call's outcome to the breaker and wraps its error.
func (s *Store) done(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		// the caller gave up: says nothing of Redis (a probe cut short is
		// retried after the interval)
		return fmt.Errorf("redisstore: %w", err)
	case err == nil:
		if s.breaker != nil {
			s.breaker.Success()
		}
		return nil
	case unavailable(err):
		if s.breaker != nil {
			s.breaker.Failure()
		}
		return fmt.Errorf("redisstore: %w: %w", ErrUnavailable, err)
	}
	if s.breaker != nil {
		s.breaker.Success() // Redis answered
	}
	return fmt.Errorf("redisstore: %w", err)
}

// unavailable is true for errors that mean Redis could not run the script:
// the network, a timeout, or a server that is loading, read-only, busy or
// without a working cluster. A caller's cancellation is not Redis's fault.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // network, timeout, closed pool
	}
	for _, p := range []string{"LOADING", "READONLY", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "NOREPLICAS", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// us converts microseconds to a Duration.
func us(n int64) time.Duration { return time.Duration(max(n, 0)) * time.Microsecond }
