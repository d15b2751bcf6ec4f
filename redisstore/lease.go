package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultLeaseTimeout is a lease's life without renewal, when
// LeaseConfig.Timeout is 0 (lease_timeout).
const DefaultLeaseTimeout = time.Minute

// LeaseConfig describes a rule's max_concurrent on Redis.
type LeaseConfig struct {
	// Max is the most leases of one key at once (max_concurrent N); at
	// least 1.
	Max int64
	// Timeout is how long a lease lives unless renewed: a crashed node's
	// leases free themselves after it. Whole milliseconds, at least 3 ms.
	// Default: DefaultLeaseTimeout.
	Timeout time.Duration
	// KeyPrefix starts every Redis key, as Config.KeyPrefix (the rule's
	// Store and its Leases may share one: the lease's key is
	// "<prefix>{<tag>}:lease"). Default: DefaultKeyPrefix.
	KeyPrefix string
	// NodeID starts every lease id of this process (a counter follows):
	// ids must be unique across the fleet. Default: the host name, the
	// process id and 8 random hex digits.
	NodeID string
	// Breaker, if set, is the breaker the calls go through (give the rule's
	// Store's, Store.Breaker, so that one failure holds both off); nil: a
	// Breaker of DefaultProbeInterval of the Leases' own.
	Breaker *Breaker
}

// Leases keeps, per key, the requests in flight as leases in Redis: a
// sorted set "<prefix>{<tag>}:lease" of lease ids scored by their expiry
// (µs, Redis's clock). Acquire is one script: drop the expired, then add
// a lease if fewer than Max are left. A renewer goroutine renews every
// live lease of the process every Timeout/3 in one pipelined call, and
// Lease.Release removes one (ZREM). A lease not renewed (its node died,
// or could not reach Redis for a whole Timeout) expires and is dropped by
// the next Acquire of its key. Safe for concurrent use; Close stops the
// renewer.
//
// One renewer per Leases, not a timer per lease: at thousands of requests
// in flight, a tick is one write of thousands of commands and one read of
// their replies (a few ms of Redis time, one round trip), where a timer
// per lease costs a goroutine wake-up, a syscall and a round trip each,
// thousands a tick.
type Leases struct {
	client  redis.UniversalClient
	cfg     LeaseConfig
	prefix  string
	node    string
	seq     atomic.Uint64
	breaker *Breaker
	clock   func() time.Time // tests only: the scripts' time (nil: TIME)

	mu   sync.Mutex
	live map[*Lease]struct{}

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// A Lease is one request in flight, held from Acquire until Release.
type Lease struct {
	ls  *Leases
	key string // the Redis key
	id  string
}

// luaAcquire: KEYS[1] the lease set; ARGV 1 clock (0: TIME), 2 max, 3
// timeout (µs), 4 id. Reply {1, count with it} or {0, count}.
const luaAcquire = luaClockArg1 + `
local z = KEYS[1]
redis.call('ZREMRANGEBYSCORE', z, '-inf', string.format('%d', now))
local n = redis.call('ZCARD', z)
if n >= tonumber(ARGV[2]) then return {0, n} end
local t = tonumber(ARGV[3])
redis.call('ZADD', z, string.format('%d', now + t), ARGV[4])
redis.call('PEXPIRE', z, math.ceil(t / 1000))
return {1, n + 1}
`

// luaRenew: KEYS[1] the lease set; ARGV 1 clock, 2 timeout (µs), 3 id.
// A lease in force lives Timeout from now on (1); an expired one is
// removed and not renewed (0): it was lost.
const luaRenew = luaClockArg1 + `
local z, id = KEYS[1], ARGV[3]
local s = tonumber(redis.call('ZSCORE', z, id))
if not s then return 0 end
if s <= now then redis.call('ZREM', z, id); return 0 end
local t = tonumber(ARGV[2])
redis.call('ZADD', z, string.format('%d', now + t), id)
redis.call('PEXPIRE', z, math.ceil(t / 1000))
return 1
`

// luaInFlight: KEYS[1] the lease set; ARGV 1 clock. The leases in force.
const luaInFlight = luaClockArg1 + `
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', now), '+inf')
`

var (
	acquireScript  = redis.NewScript(luaAcquire)
	renewScript    = redis.NewScript(luaRenew)
	inFlightScript = redis.NewScript(luaInFlight)
)

// NewLeases returns the Leases of cfg on client, its renewer started, or
// cfg's error. It does not touch Redis.
func NewLeases(client redis.UniversalClient, cfg LeaseConfig) (*Leases, error) {
	if client == nil {
		return nil, errors.New("redisstore: no client")
	}
	if cfg.Max < 1 {
		return nil, fmt.Errorf("max_concurrent %d: must be at least 1", cfg.Max)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultLeaseTimeout
	}
	if cfg.Timeout < 3*time.Millisecond || cfg.Timeout%time.Millisecond != 0 {
		return nil, fmt.Errorf("lease_timeout %s: must be whole milliseconds, at least 3ms", cfg.Timeout)
	}
	if strings.ContainsAny(cfg.KeyPrefix, "{}") {
		return nil, fmt.Errorf("key prefix %q: must not contain '{' or '}'", cfg.KeyPrefix)
	}
	l := &Leases{client: client, cfg: cfg, prefix: cfg.KeyPrefix, node: cfg.NodeID, breaker: cfg.Breaker,
		live: make(map[*Lease]struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if l.prefix == "" {
		l.prefix = DefaultKeyPrefix
	}
	if l.node == "" {
		l.node = nodeID()
	}
	if l.breaker == nil {
		l.breaker = NewBreaker(DefaultProbeInterval)
	}
	go l.renewer()
	return l, nil
}

// Config returns the configuration, defaults applied.
func (l *Leases) Config() LeaseConfig { return l.cfg }

// Acquire takes a lease of key if fewer than Max are in force, in one
// round trip: the lease (nil when refused) and the leases of key in force
// after the call (Max or more when refused). Errors are Store's: an
// ErrUnavailable means Redis could not decide, and the caller's
// on_store_error applies (fail_open: admit without a lease; fail_closed:
// refuse).
func (l *Leases) Acquire(ctx context.Context, key string) (*Lease, int64, error) {
	return l.AcquireMax(ctx, key, l.cfg.Max)
}

// AcquireMax is Acquire with max in place of Config.Max: the key's N
// after a tier's or a country's factor. A max of 0 or less refuses.
func (l *Leases) AcquireMax(ctx context.Context, key string, max int64) (*Lease, int64, error) {
	if !l.breaker.Allow() {
		return nil, 0, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	id := l.node + ":" + strconv.FormatUint(l.seq.Add(1), 10)
	rk := l.redisKey(key)
	res, err := acquireScript.Run(ctx, l.client, []string{rk}, l.clockArg(), max, l.cfg.Timeout.Microseconds(), id).Int64Slice()
	if err := finish(l.breaker, err); err != nil {
		return nil, 0, err
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("redisstore: unexpected reply %v", res)
	}
	if res[0] != 1 {
		return nil, res[1], nil
	}
	ls := &Lease{ls: l, key: rk, id: id}
	l.mu.Lock()
	l.live[ls] = struct{}{}
	l.mu.Unlock()
	return ls, res[1], nil
}

// ID is the lease's id in Redis: the node id and a counter.
func (x *Lease) ID() string { return x.id }

// Release ends the lease (the response was written, the client went away
// or the hijacked connection closed): it is no longer renewed, and is
// removed from Redis (ZREM). If the call fails the lease expires on its
// own within the timeout. Releasing twice is harmless.
func (x *Lease) Release(ctx context.Context) error {
	l := x.ls
	l.mu.Lock()
	_, ok := l.live[x]
	delete(l.live, x)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	if !l.breaker.Allow() {
		return fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	return finish(l.breaker, l.client.ZRem(ctx, x.key, x.id).Err())
}

// Live is the number of leases this process holds (acquired, not released).
func (l *Leases) Live() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}

// InFlight is the leases of key in force in the whole fleet (admin's
// view of a key).
func (l *Leases) InFlight(ctx context.Context, key string) (int64, error) {
	if !l.breaker.Allow() {
		return 0, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	n, err := inFlightScript.Run(ctx, l.client, []string{l.redisKey(key)}, l.clockArg()).Int64()
	return n, finish(l.breaker, err)
}

// RenewAll renews every live lease in one pipelined call (the renewer
// calls it every Timeout/3), and returns how many were lost: expired
// before their renewal (Redis was out of reach for a whole Timeout), so
// no longer counted; they are dropped from the live set.
func (l *Leases) RenewAll(ctx context.Context) (lost int, err error) {
	l.mu.Lock()
	leases := make([]*Lease, 0, len(l.live))
	for x := range l.live {
		leases = append(leases, x)
	}
	l.mu.Unlock()
	if len(leases) == 0 {
		return 0, nil
	}
	if !l.breaker.Allow() {
		return 0, fmt.Errorf("redisstore: %w (breaker open)", ErrUnavailable)
	}
	timeout, clock := l.cfg.Timeout.Microseconds(), l.clockArg()
	run := func() ([]*redis.Cmd, error) {
		pipe := l.client.Pipeline()
		cmds := make([]*redis.Cmd, len(leases))
		for i, x := range leases {
			cmds[i] = renewScript.EvalSha(ctx, pipe, []string{x.key}, clock, timeout, x.id)
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = renewScript.Load(ctx, l.client).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err := finish(l.breaker, err); err != nil {
		return 0, err
	}
	l.mu.Lock()
	for i, c := range cmds {
		if n, _ := c.Int64(); n != 1 {
			delete(l.live, leases[i])
			lost++
		}
	}
	l.mu.Unlock()
	return lost, nil
}

// renewer renews the live leases every Timeout/3 until Close.
func (l *Leases) renewer() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.Timeout / 3)
	defer t.Stop()
	stop := l.stop
	for {
		select {
		case <-stop:
			stop = nil // closed: renew what is live until none is
			if l.Live() == 0 {
				return
			}
		case <-t.C:
			if stop == nil && l.Live() == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout/3)
			_, _ = l.RenewAll(ctx) // a failure is the breaker's; the next tick retries
			cancel()
		}
	}
}

// Close ends the renewer once no lease is live: leases still held are
// renewed until they are released, so a request that runs across a
// reload (whose old config closes its Leases) keeps its place. With none
// live it waits for the renewer to end; else it returns at once.
func (l *Leases) Close() {
	l.once.Do(func() { close(l.stop) })
	if l.Live() == 0 {
		<-l.done
	}
}

// redisKey is the name of key's lease set.
func (l *Leases) redisKey(key string) string { return l.prefix + "{" + Escape(key) + "}:lease" }

// clockArg is the scripts' clock: 0 (Redis's TIME) unless a test set one.
func (l *Leases) clockArg() int64 {
	if l.clock == nil {
		return 0
	}
	return l.clock().UnixMicro()
}
