package redisstore

import (
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// effective fills each quota's Effective (draft-11's effective window)
// from what the script reported, Remaining and Reset, to the microsecond:
// for fixed_window the window's end (with a burst, no earlier than one
// unit's time, within which the bucket frees its next); for token_bucket and leaky_bucket the
// time one more unit fits once the Remaining units are taken (Reset less
// the units the bucket holds beyond them); for sliding_window and
// sliding_log, which the reply does not describe enough, the time until
// the quota is whole again (later than the exact effective window, never
// earlier), or the denial's RetryAfter when that is sooner.
func (s *Store) effective(d *limiter.Decision, scale float64) {
	shortest := 0
	for i, l := range s.cfg.Limits {
		if l.Window < s.cfg.Limits[shortest].Window {
			shortest = i
		}
	}
	for i := range d.Len {
		q := &d.Quotas[i]
		unit := time.Duration(0)
		if q.Limit > 0 {
			unit = time.Duration(int64(q.Window) / q.Limit)
		}
		eff := q.Reset
		switch s.cfg.algorithm() {
		case limiter.TokenBucket:
			capacity := q.Limit
			if i == shortest && s.cfg.Burst > 0 {
				capacity = limiter.ScaledCount(s.cfg.Burst, scale)
			}
			eff = q.Reset + time.Duration(q.Remaining+1-capacity)*unit
		case limiter.LeakyBucket:
			maxDelay := s.cfg.MaxDelay
			if maxDelay == 0 {
				maxDelay = limiter.DefaultMaxDelay
			}
			if s.cfg.Burst > 0 {
				maxDelay = min(maxDelay, time.Duration(limiter.ScaledCount(s.cfg.Burst, scale))*unit)
			}
			eff = q.Reset + time.Duration(q.Remaining)*unit - maxDelay
		default: // fixed_window, sliding_window, sliding_log
			if i == shortest && s.cfg.Burst > 0 {
				// the burst bucket in front frees its next unit within
				// one unit's time; the window its own at Reset: the
				// later of the two is never earlier than the limiter's
				eff = max(eff, unit)
			}
			if s.cfg.algorithm() != limiter.FixedWindow && !d.Allowed && q.Remaining == 0 {
				eff = min(eff, d.RetryAfter)
			}
		}
		if eff <= 0 { // rounding to the microsecond: the next unit is near
			eff = max(unit, time.Microsecond)
		}
		q.Effective = eff
	}
}
