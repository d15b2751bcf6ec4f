// Package limiters puts edgelimit and other Go rate limiters behind one
// interface, so that the same benchmarks and tests drive every one of them.
//
// Each contender is a keyed store: a decision per request, on a key, at a
// time passed in. Peers that are not keyed (golang.org/x/time/rate,
// go.uber.org/ratelimit) are kept one per key in a sync.Map, the usual
// pattern. Peers that read the wall clock themselves say so (WallClock).
package limiters

import "time"

// Store decides requests: Allow reports whether one request on key may pass
// at now, and takes it if so. A Store is safe for concurrent use.
type Store interface {
	Allow(key string, now time.Time) bool
}

// Contender is one rate limiter under test.
type Contender struct {
	// Name is the benchmark's sub-name: "edgelimit/sliding_window",
	// "x-time-rate", ...
	Name string
	// New returns an empty Store that lets limit requests a key pass per
	// window, all of them back to back. maxKeys bounds the live keys where
	// the store has such a bound (edgelimit); the peers ignore it and grow
	// without bound. New panics if the limiter rejects the configuration.
	New func(limit int64, window time.Duration, maxKeys int) Store
	// WallClock is true if the Store ignores the time passed to Allow and
	// reads time.Now instead (its API takes no time).
	WallClock bool
}

// Contenders is every contender: edgelimit's five algorithms, then the
// peers.
func Contenders() []Contender {
	cs := edgelimitContenders()
	return append(cs,
		Contender{Name: "x-time-rate", New: newXTimeRate},
		Contender{Name: "httprate", New: newHTTPRate},
		Contender{Name: "uber-ratelimit", New: newUberRatelimit},
		Contender{Name: "ulule-limiter", New: newUlule, WallClock: true},
	)
}
