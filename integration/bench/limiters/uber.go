package limiters

import (
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/ratelimit"
)

// uberRatelimit is go.uber.org/ratelimit, one Limiter per key in a
// sync.Map. That limiter is a pacer: Take blocks until the caller's turn,
// one every window/limit, and it never refuses. Here it never blocks:
// each key's Limiter has its own clock (WithClock), whose Now is the time
// passed to Allow and whose Sleep returns at once, and a request whose
// turn is later than now (Take would have slept) is denied. Take has then
// booked that turn all the same: uber's API has no way to ask without
// taking, so a denied request costs the key as an allowed one does.
//
// So that limit requests pass back to back, as with the other contenders,
// each Limiter has a slack of limit (WithSlack; the default, 10, is a
// burst of 10 turns) and starts with it full: its first Take is made at
// one window before the key's first request (Take's first call sets the
// pace from the time it is made; slack only builds up after it).
//
// Not exact under concurrency on one key with times that differ: a clock
// is shared by the goroutines deciding on its key, so a Take may read
// another goroutine's now. The benchmarks pass one fixed time.
type uberRatelimit struct {
	keys   sync.Map // string → *uberKey
	limit  int
	window time.Duration
}

// uberKey is one key's Limiter and its clock.
type uberKey struct {
	clock uberClock
	lim   ratelimit.Limiter
}

// uberClock is a ratelimit.Clock that reads the time it was last set to,
// and never sleeps.
type uberClock struct{ now atomic.Int64 }

func (c *uberClock) Now() time.Time        { return time.Unix(0, c.now.Load()) }
func (c *uberClock) Sleep(d time.Duration) {}

// set moves the clock to t (in ns), writing only if it changes.
func (c *uberClock) set(t int64) {
	if c.now.Load() != t {
		c.now.Store(t)
	}
}

func newUberRatelimit(limit int64, window time.Duration, _ int) Store {
	return &uberRatelimit{limit: int(limit), window: window}
}

func (s *uberRatelimit) Allow(key string, now time.Time) bool {
	t := now.UnixNano()
	v, ok := s.keys.Load(key)
	if !ok {
		k := &uberKey{}
		k.clock.set(t - int64(s.window))
		k.lim = ratelimit.New(s.limit, ratelimit.Per(s.window), ratelimit.WithSlack(s.limit), ratelimit.WithClock(&k.clock))
		k.lim.Take() // the pace starts a window back: the slack is full
		v, _ = s.keys.LoadOrStore(key, k)
	}
	k := v.(*uberKey)
	k.clock.set(t)
	// Take returns the time of the request's turn: now if it is due, a
	// later time if it would have slept until then.
	return k.lim.Take().UnixNano() <= t
}
