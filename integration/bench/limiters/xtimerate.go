package limiters

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// xTimeRate is golang.org/x/time/rate, one *rate.Limiter per key in a
// sync.Map: a token bucket refilled at limit per window, of capacity
// limit. Keys are never removed.
type xTimeRate struct {
	keys  sync.Map // string → *rate.Limiter
	limit rate.Limit
	burst int
}

func newXTimeRate(limit int64, window time.Duration, _ int) Store {
	return &xTimeRate{limit: rate.Limit(float64(limit) / window.Seconds()), burst: int(limit)}
}

// Allow looks the key up first, and creates its limiter only if it is
// missing (LoadOrStore alone would allocate a limiter on every request).
func (s *xTimeRate) Allow(key string, now time.Time) bool {
	v, ok := s.keys.Load(key)
	if !ok {
		v, _ = s.keys.LoadOrStore(key, rate.NewLimiter(s.limit, s.burst))
	}
	return v.(*rate.Limiter).AllowN(now, 1)
}
