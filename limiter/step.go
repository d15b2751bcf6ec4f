package limiter

import "time"

// step is what one limit says of one request: whether it fits, the key's
// words for that limit if the request is taken, and the quota to report.
type step struct {
	ok    bool
	a, b  uint64 // the limit's state words after the request, if taken
	quota Quota
	retry int64 // ns until the request would fit; when !ok
	never bool  // the request can never fit: its cost exceeds the limit
	delay int64 // ns to hold the request; leaky bucket only
}

// newQuota fills the reported quota of a step; effective is at least 1ns.
func newQuota(n, w, remaining, reset, effective int64) Quota {
	return Quota{
		Limit:     n,
		Window:    time.Duration(w),
		Remaining: max(remaining, 0),
		Reset:     time.Duration(max(reset, 0)),
		Effective: time.Duration(max(effective, 1)),
	}
}

// allowed sets s to an allowed step of state a (and b 0) and delay, its
// quota left to set: field by field, not a composite literal, which the
// compiler builds on the stack and copies (with 16-byte loads of 8-byte
// stores, which stall). For the unit buckets' hot path.
func (s *step) allowed(a uint64, delay int64) {
	s.ok, s.a, s.b, s.retry, s.never, s.delay = true, a, 0, 0, false, delay
}

// set is *q = newQuota(...), field by field (see step.allowed).
func (q *Quota) set(n, w, remaining, reset, effective int64) {
	q.Limit = n
	q.Window = time.Duration(w)
	q.Remaining = max(remaining, 0)
	q.Reset = time.Duration(max(reset, 0))
	q.Effective = time.Duration(max(effective, 1))
}
