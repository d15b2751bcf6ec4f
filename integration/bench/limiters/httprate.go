package limiters

import (
	"math"
	"sync"
	"time"

	"github.com/go-chi/httprate"
)

// httpRate is go-chi/httprate's in-memory counter (NewLocalLimitCounter),
// driven per request exactly as httprate's own RateLimiter drives it. The
// counter keeps two maps of xxh3(key) → count, the current window and the
// previous one, and clears them as windows pass; keys are not bounded
// otherwise.
type httpRate struct {
	mu      sync.Mutex // RateLimiter.mu: one lock for every key
	counter httprate.LimitCounter
	limit   int
	window  time.Duration
}

func newHTTPRate(limit int64, window time.Duration, _ int) Store {
	return &httpRate{counter: httprate.NewLocalLimitCounter(window), limit: int(limit), window: window}
}

// Allow mirrors httprate v0.16.1, limiter.go, (*RateLimiter).OnLimit and
// its calculateRate, less the response headers and the request context
// (no per-request limit, increment 1): under RateLimiter.mu, Get the
// current and previous windows' counts, estimate the rate as
// prev×(W−elapsed)/W + curr, round it, deny if rate+1 > limit, else
// IncrementBy 1. Differences, all forced by passing the time in: the time
// is now instead of time.Now().UTC() (read twice there, once here), and
// windows are aligned to the epoch (httprate offsets them by the
// limiter's start instant, taken from the wall clock).
func (s *httpRate) Allow(key string, now time.Time) bool {
	now = now.UTC() // httprate compares windows with ==: keep one Location
	currentWindow := now.Truncate(s.window)
	s.mu.Lock()
	// calculateRate
	previousWindow := currentWindow.Add(-s.window)
	currCount, prevCount, err := s.counter.Get(key, currentWindow, previousWindow)
	if err != nil {
		s.mu.Unlock()
		return false
	}
	diff := now.Sub(currentWindow)
	rateFloat := float64(prevCount)*(float64(s.window)-float64(diff))/float64(s.window) + float64(currCount)
	// OnLimit
	rate := int(math.Round(rateFloat))
	const increment = 1
	if rate+increment > s.limit {
		s.mu.Unlock()
		return false
	}
	err = s.counter.IncrementBy(key, currentWindow, increment)
	s.mu.Unlock()
	return err == nil
}
