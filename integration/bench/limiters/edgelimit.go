package limiters

import (
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// edgelimitStore is an edgelimit Limiter: one request costs 1.
type edgelimitStore struct{ l *limiter.Limiter }

func (s edgelimitStore) Allow(key string, now time.Time) bool {
	return s.l.AllowAt(key, now, 1).Allowed
}

// edgelimitContenders is one contender per algorithm, named
// "edgelimit/<algorithm>".
func edgelimitContenders() []Contender {
	algos := []limiter.Algorithm{
		limiter.SlidingWindow, limiter.FixedWindow, limiter.SlidingLog,
		limiter.TokenBucket, limiter.LeakyBucket,
	}
	cs := make([]Contender, len(algos))
	for i, algo := range algos {
		cs[i] = Contender{
			Name: "edgelimit/" + string(algo),
			New: func(limit int64, window time.Duration, maxKeys int) Store {
				return newEdgelimit(algo, limit, window, maxKeys)
			},
		}
	}
	return cs
}

// newEdgelimit is a Limiter of algo for limit per window. A leaky bucket
// gets a queue of limit−1 (so limit requests pass back to back, the last
// one delayed almost a window) and a MaxDelay of one window; with a limit
// of 1 that MaxDelay lets a second request queue.
func newEdgelimit(algo limiter.Algorithm, limit int64, window time.Duration, maxKeys int) Store {
	cfg := limiter.Config{
		Algorithm: algo,
		Limits:    []limiter.Limit{{Count: limit, Window: window}},
		MaxKeys:   maxKeys,
	}
	if algo == limiter.LeakyBucket {
		cfg.Burst = limit - 1
		cfg.MaxDelay = window
	}
	l, err := limiter.New(cfg)
	if err != nil {
		panic(err)
	}
	return edgelimitStore{l}
}
