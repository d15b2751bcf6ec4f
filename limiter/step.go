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
