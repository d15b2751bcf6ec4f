package limiter

import (
	"fmt"
	"time"
)

// Algorithm names a rate-limiting algorithm. The names are the ones used in
// Caddyfiles and JSON.
type Algorithm string

// The algorithms. See the package documentation for what each one keeps and
// how exact it is.
const (
	SlidingWindow Algorithm = "sliding_window"
	FixedWindow   Algorithm = "fixed_window"
	SlidingLog    Algorithm = "sliding_log"
	TokenBucket   Algorithm = "token_bucket"
	LeakyBucket   Algorithm = "leaky_bucket"
)

// Bounds on a configuration.
const (
	// MaxLimits is how many limits one rule may enforce together.
	MaxLimits = 8
	// MaxCount is the largest limit or burst, in units per window: counts
	// are kept in 32 bits.
	MaxCount = 1<<32 - 1
	// MaxLogCount is the largest SlidingLog limit: its event ring is
	// indexed in 32 bits. A log costs 16 bytes per admission held, so a
	// large limit is memory the operator chooses to spend.
	MaxLogCount = 1<<31 - 1
	// MinWindow and MaxWindow bound a limit's window.
	MinWindow = time.Millisecond
	MaxWindow = 366 * 24 * time.Hour
	// DefaultMaxKeys bounds the live keys of a rule when Config.MaxKeys is 0.
	DefaultMaxKeys = 1_000_000
	// DefaultMaxDelay is how long a leaky bucket holds a request at most
	// when Config.MaxDelay is 0.
	DefaultMaxDelay = time.Second
)

// Limit is one quota: Count units per Window.
type Limit struct {
	Count  int64
	Window time.Duration
}

// String formats l as "100/1m0s".
func (l Limit) String() string { return fmt.Sprintf("%d/%s", l.Count, l.Window) }

// Config describes a rule's limits. The zero value of every field but
// Limits is a usable default.
type Config struct {
	// Algorithm is how the limits are enforced. Default: SlidingWindow, or
	// FixedWindow if a limit is a calendar period (Periods).
	Algorithm Algorithm
	// Limits are enforced together: a request passes only if every limit
	// has room for it. At least one, at most MaxLimits.
	Limits []Limit
	// Burst shapes the limit with the shortest window. Window algorithms:
	// the capacity of a token bucket refilled at that limit's rate, in front
	// of the window (0: no bucket). TokenBucket: the bucket's capacity
	// (0: the limit's Count). LeakyBucket: the queue depth (0: bounded by
	// MaxDelay alone).
	Burst int64
	// MaxDelay is, for LeakyBucket only, the longest a request is held
	// before it is served. Default: 1s.
	MaxDelay time.Duration
	// MaxKeys bounds the live keys; past it the least recently used key is
	// evicted. Default: 1,000,000.
	MaxKeys int
	// Shares keeps, per key, a share of the limit and a demand counter, for
	// a cluster that divides a global limit between nodes (see SetShare).
	// It costs 8 bytes per key. Under it, a SlidingWindow's windows start
	// at each key's first unit rather than at the epoch's multiples (so a
	// key's first w admits at most its share of N, wherever it starts),
	// a TokenBucket holds at least min(capacity, MinShareDepth) units, and
	// no request takes the lock-free path. Default: off.
	Shares bool
	// Periods, if set, holds one entry per limit of Limits: the calendar
	// period whose windows the limit counts in (calendar.go), or "" for
	// the epoch-aligned windows of its Window. A calendar limit's Window
	// is its period's Span, and its algorithm FixedWindow. Default: none,
	// every limit a duration.
	Periods []Period
	// Location is the time zone of the calendar periods. Default: UTC.
	Location *time.Location
}

// Validate reports the first problem with c, in words fit for a config
// error.
func (c Config) Validate() error {
	switch c.Algorithm {
	case "", SlidingWindow, FixedWindow, SlidingLog, TokenBucket, LeakyBucket:
	default:
		return fmt.Errorf("unknown algorithm %q (want sliding_window, fixed_window, sliding_log, token_bucket or leaky_bucket)", c.Algorithm)
	}
	if len(c.Limits) == 0 {
		return fmt.Errorf("no limit: at least one is required")
	}
	if len(c.Limits) > MaxLimits {
		return fmt.Errorf("%d limits: at most %d", len(c.Limits), MaxLimits)
	}
	if c.Algorithm == LeakyBucket && len(c.Limits) > 1 {
		return fmt.Errorf("leaky_bucket takes one limit; put longer quotas in another rule")
	}
	for _, l := range c.Limits {
		if l.Count < 1 || l.Count > MaxCount {
			return fmt.Errorf("limit %d: must be between 1 and %d", l.Count, int64(MaxCount))
		}
		if c.Algorithm == SlidingLog && l.Count > MaxLogCount {
			return fmt.Errorf("limit %d: sliding_log keeps an event per admission, at most %d; use sliding_window for larger limits", l.Count, MaxLogCount)
		}
		if l.Window < MinWindow || l.Window > MaxWindow {
			return fmt.Errorf("window %s: must be between %s and %s", l.Window, MinWindow, MaxWindow)
		}
	}
	if c.Burst < 0 || c.Burst > MaxCount {
		return fmt.Errorf("burst %d: must be between 0 and %d", c.Burst, int64(MaxCount))
	}
	if c.MaxDelay < 0 {
		return fmt.Errorf("max_delay %s: must not be negative", c.MaxDelay)
	}
	if c.MaxDelay != 0 && c.Algorithm != LeakyBucket {
		return fmt.Errorf("max_delay applies to leaky_bucket only, not %s", c.algorithm())
	}
	if c.MaxKeys < 0 {
		return fmt.Errorf("max_keys %d: must not be negative", c.MaxKeys)
	}
	return c.validateCalendar()
}

func (c Config) algorithm() Algorithm {
	if c.Algorithm == "" {
		return DefaultAlgorithm(c.Periods)
	}
	return c.Algorithm
}

// shortest is the index of the limit with the shortest window: the one
// Burst shapes.
func (c Config) shortest() int {
	best := 0
	for i, l := range c.Limits {
		if l.Window < c.Limits[best].Window {
			best = i
		}
	}
	return best
}
