package limiters

import (
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// edgelimitStore is an edgelimit Limiter: one request costs 1, decided
// by AllowInto with quotas false, as a handler that sends no RateLimit
// headers would call it: the peers report whether a request passes and
// nothing more. What it admits is AllowAt's (TestAllowIntoMatchesAllowAt
// in limiter/); edgelimitQuotaStore is AllowAt itself.
type edgelimitStore struct{ l *limiter.Limiter }

func (s edgelimitStore) Allow(key string, now time.Time) bool {
	var d limiter.Decision
	s.l.AllowInto(&d, key, now, 1, 1, false)
	return d.Allowed
}

// edgelimitQuotaStore is an edgelimit Limiter decided by AllowAt: the
// whole Decision, quotas included, returned by value (what the handler
// calls to send RateLimit headers).
type edgelimitQuotaStore struct{ l *limiter.Limiter }

func (s edgelimitQuotaStore) Allow(key string, now time.Time) bool {
	return s.l.AllowAt(key, now, 1).Allowed
}

// edgelimitQuotaContenders is edgelimitContenders deciding by AllowAt,
// named "edgelimit-quotas/<algorithm>": for BenchmarkQuotas, not among
// Contenders.
func edgelimitQuotaContenders() []Contender {
	cs := edgelimitContenders()
	for i, c := range cs {
		cs[i].Name = "edgelimit-quotas/" + c.Name[len("edgelimit/"):]
		cs[i].New = func(limit int64, window time.Duration, maxKeys int) Store {
			return edgelimitQuotaStore{c.New(limit, window, maxKeys).(edgelimitStore).l}
		}
	}
	return cs
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
