package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// DefaultKeyPrefix starts every Redis key when Config.KeyPrefix is empty.
const DefaultKeyPrefix = "edgelimit:"

// DefaultBlockReset is how long offences are remembered after a block
// ended, when Config.BlockReset is 0.
const DefaultBlockReset = 24 * time.Hour

// DefaultProbeInterval is how often a Store's breaker lets one call probe
// a Redis that failed, when Config.ProbeInterval is 0.
const DefaultProbeInterval = time.Second

// Config describes a rule's limits kept in Redis. Algorithm, Limits, Burst
// and MaxDelay mean what they mean in limiter.Config, and are validated by
// its rules.
type Config struct {
	// Algorithm is how the limits are enforced. Default: sliding_window.
	Algorithm limiter.Algorithm
	// Limits are enforced together, all or nothing. Windows must be whole
	// microseconds (the unit of Redis time).
	Limits []limiter.Limit
	// Burst shapes the limit with the shortest window: window algorithms
	// put a token bucket of this capacity in front of it (0: none);
	// token_bucket takes it as that limit's capacity (0: its count);
	// leaky_bucket as its queue depth (0: bounded by MaxDelay alone).
	Burst int64
	// MaxDelay is, for leaky_bucket only, the longest a request is held.
	// Default: 1s.
	MaxDelay time.Duration
	// KeyPrefix starts every Redis key of the rule; give each rule its own
	// (say "edgelimit:api_v1:"). It must not contain '{' or '}', which
	// would move the hash tag. Default: "edgelimit:".
	KeyPrefix string
	// ProbeInterval is how long the Store's breaker fails calls fast after
	// Redis failed, before one call probes it again. Negative: no breaker.
	// Default: 1s.
	ProbeInterval time.Duration
	// Coalesce decides the requests of one key (and cost and scale) that
	// arrive while a call for that key is in flight in one call, sent when
	// it returns: the script decides them one after the other, exactly as
	// separate calls would. Default: off.
	Coalesce bool
	// OverLimitCacheKeys, when positive, keeps up to that many keys that
	// Redis denied: until the denial's RetryAfter passes, a request of
	// that key (of at least the cost denied, at the same scale) is denied
	// without a call. Such a request would be denied by Redis too, unless
	// units came back in between (a refund, a reset, or a smaller cost
	// elsewhere in the fleet). Default: 0, off.
	OverLimitCacheKeys int
	// BlockFor, when set, blocks a key once the rule denies it (block_for):
	// every decision on the key is then denied, for the block's rest,
	// without taking units. The n-th block within BlockReset of the end of
	// the last one lasts BlockFor[min(n, len)-1] (the last one repeats).
	// A rule in shadow must leave it empty (a shadow rule blocks no one).
	// Each must be positive and a whole number of microseconds. Default:
	// none, no blocks.
	BlockFor []time.Duration
	// BlockReset is how long a key's offence count is remembered after
	// its last block ended (block_reset). Default: DefaultBlockReset.
	BlockReset time.Duration
	// Periods and Location are limiter.Config's: the calendar period of
	// each limit ("" for a duration) and their time zone. A calendar
	// period's boundaries are computed by the Store, on its clock, and
	// given to the script with the periods on either side: the script
	// counts in the one that holds Redis's clock. Default: none; UTC.
	Periods  []limiter.Period
	Location *time.Location
	// Batcher, if set, is how the Store's scripts go to Redis: with the
	// concurrent calls of every Store sharing it, in one pipeline (see
	// Batcher); it must be on the Store's client. Default: none, a round
	// trip per call, alone.
	Batcher *Batcher
	// Counters, if set, is where the Store counts its decisions (see
	// Store.Stats); several Stores may share one. Default: the Store's own.
	Counters *Counters
}

// Validate reports the first problem with c, in words fit for a config
// error.
func (c Config) Validate() error {
	lc := limiter.Config{Algorithm: c.Algorithm, Limits: c.Limits, Burst: c.Burst, MaxDelay: c.MaxDelay, Periods: c.Periods, Location: c.Location}
	if err := lc.Validate(); err != nil {
		return err
	}
	for _, l := range c.Limits {
		if l.Window%time.Microsecond != 0 {
			return fmt.Errorf("window %s: must be a whole number of microseconds on redis", l.Window)
		}
	}
	for _, d := range c.BlockFor {
		if d <= 0 || d%time.Microsecond != 0 {
			return fmt.Errorf("block_for %s: must be positive and a whole number of microseconds", d)
		}
	}
	if c.BlockReset < 0 || c.BlockReset%time.Microsecond != 0 {
		return fmt.Errorf("block_reset %s: must not be negative and a whole number of microseconds", c.BlockReset)
	}
	if c.OverLimitCacheKeys < 0 {
		return fmt.Errorf("over-limit cache of %d keys: must not be negative", c.OverLimitCacheKeys)
	}
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		return fmt.Errorf("key prefix %q: must not contain '{' or '}'", c.KeyPrefix)
	}
	return nil
}

// algorithm is c.Algorithm with its default.
func (c Config) algorithm() limiter.Algorithm {
	if c.Algorithm == "" {
		return limiter.DefaultAlgorithm(c.Periods)
	}
	return c.Algorithm
}

// blockReset is c.BlockReset with its default.
func (c Config) blockReset() time.Duration {
	if c.BlockReset == 0 {
		return DefaultBlockReset
	}
	return c.BlockReset
}

// args are the script's ARGV after op, cost, requests, scaled and clock:
// burst, max delay (µs), block reset (µs), the number of block durations
// and each (µs), 0 calendar limits (withPeriods puts them in, per call),
// and count, window (µs), capacity per limit, every count and capacity at
// scale (limiter.ScaledCount: rounded down, at least 1).
func (c Config) args(scale float64) []any {
	algo := c.algorithm()
	shortest := 0
	for i, l := range c.Limits {
		if l.Window < c.Limits[shortest].Window {
			shortest = i
		}
	}
	at := func(n int64) int64 {
		if n <= 0 {
			return 0
		}
		return limiter.ScaledCount(n, scale)
	}
	burst := int64(0)
	if c.Burst > 0 && (algo == limiter.SlidingWindow || algo == limiter.FixedWindow || algo == limiter.SlidingLog) {
		burst = c.Burst
	}
	maxDelay := c.MaxDelay
	if maxDelay == 0 {
		maxDelay = limiter.DefaultMaxDelay
	}
	args := []any{at(burst), maxDelay.Microseconds(), c.blockReset().Microseconds(), len(c.BlockFor)}
	for _, d := range c.BlockFor {
		args = append(args, d.Microseconds())
	}
	args = append(args, 0)
	for i, l := range c.Limits {
		capacity := l.Count
		switch {
		case algo == limiter.TokenBucket && i == shortest && c.Burst > 0:
			capacity = c.Burst
		case algo == limiter.LeakyBucket:
			capacity = c.Burst
		}
		args = append(args, at(l.Count), l.Window.Microseconds(), at(capacity))
	}
	return args
}

// script is the Lua source for c's algorithm.
func (c Config) script() string {
	var algo string
	switch c.algorithm() {
	case limiter.FixedWindow:
		algo = luaFixedWindow
	case limiter.SlidingWindow:
		algo = luaSlidingWindow
	case limiter.SlidingLog:
		algo = luaSlidingLog
	case limiter.TokenBucket:
		algo = luaTokenBucket
	case limiter.LeakyBucket:
		algo = luaLeakyBucket
	}
	return luaPrelude + algo + luaDriver
}
