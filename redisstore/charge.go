package redisstore

import (
	"context"
	"time"
)

// Units taken after the response (count_status, cost_header) are two
// calls: Check before the request (one unit must be left; nothing is
// taken), and ChargeScaled after the response, which takes the units
// whatever the limits, so that later requests wait for them. What a
// charge of c units does, per algorithm (every limit of the rule, and a
// window algorithm's burst bucket, alike):
//
//   - fixed_window: the current window's count grows by c, past the limit
//     if need be (Remaining reads 0); the next request passes when the
//     window ends, since the next window starts at 0: an overshoot is not
//     carried into it.
//   - sliding_window: the current window's count grows by c; the estimate
//     prev×(1−elapsed/W)+curr may pass the limit, and the next request
//     passes once it is at most count−1: within this window as the
//     previous count's weight falls, or in the next, where this window's
//     count is the previous one and weighs on.
//   - sliding_log: one event of c units at now (at the newest event's
//     time if that is later); the units held may pass the limit, and the
//     next request passes once the oldest events have left the window so
//     that held+1 ≤ count.
//   - token_bucket, leaky_bucket (GCRA): the TAT moves c units (c×W/count)
//     past max(TAT, now), however far: a level beyond empty owes the
//     units, and the next request passes once the TAT is back within the
//     bucket's capacity (token_bucket: capacity−1 units ahead of now;
//     leaky_bucket: within the max delay and the queue depth).
//
// At a scale other than 1, a token bucket fuller than full is first read
// as full (limiter's atMostFull), as for an admission; a later scaled
// admission does the same, and so forgives a debt beyond one full bucket
// (the limiter has the same rule). A charge never creates a block, is
// never cached and takes nothing at a cost of 0. Every Redis key of the
// key lives until the state it holds matters no more (as admissions).

// Check decides whether one unit is left for key at scale, taking
// nothing: the check before a request whose units ChargeScaled takes
// after the response. It is Decide of one unit with Peek's semantics,
// except that a denial starts the key's next block (Config.BlockFor),
// and the over-limit cache is read and filled as by Decide. Not
// coalesced.
func (s *Store) Check(ctx context.Context, key string, scale float64) (Decision, error) {
	if !(scale > 0) {
		return Decision{Decision: s.blocked()}, nil
	}
	var start time.Time
	var epoch uint64
	if s.denied != nil {
		start = s.now()
		var d Decision
		var ok bool
		if d, ok, epoch = s.denied.get(key, 1, scale, start); ok {
			s.stats.OverLimitCached.Add(1)
			return d, nil
		}
	}
	s.stats.Calls.Add(1)
	var one [1]Decision
	ds, err := s.decide(ctx, key, "k", 1, 1, scale, false, one[:0])
	if err != nil {
		return Decision{}, err
	}
	d := ds[0]
	if !d.Allowed && s.denied != nil {
		s.denied.put(key, 1, scale, start.Add(s.now().Sub(start)/2), epoch, d)
	}
	return d, nil
}

// Charge is ChargeScaled at scale 1.
func (s *Store) Charge(ctx context.Context, key string, cost int64) error {
	return s.ChargeScaled(ctx, key, cost, 1)
}

// ChargeScaled takes cost units from every limit of key at scale (the
// scale of its Check), past the limits if need be, in one atomic call:
// see the semantics above. A cost of 0 or less, or a scale of 0 or less,
// takes nothing, without a call. Errors are Allow's (ErrUnavailable when
// Redis could not take them: the units are then lost).
func (s *Store) ChargeScaled(ctx context.Context, key string, cost int64, scale float64) error {
	if cost <= 0 || !(scale > 0) {
		return nil
	}
	_, err := s.run(ctx, key, "t", cost, 1, scale, false)
	return err
}
