package limiter

import "time"

// Quota is the state of one limit for one key, as a decision left it.
type Quota struct {
	// Limit is the limit in force, in units per Window (after any scale).
	Limit int64
	// Window is the limit's window.
	Window time.Duration
	// Remaining is how many units the key may still take now (never
	// negative). For a leaky bucket, how many more requests it may queue.
	Remaining int64
	// Reset is how long until the key's quota is whole again, if it takes
	// nothing more.
	Reset time.Duration
	// Effective is the limit's effective window (draft-11's t): how long,
	// if the key took its Remaining now, until one more unit would fit. A
	// fixed window's end; the next unit of a token or leaky bucket; the
	// time a sliding window's estimate, or a sliding log's oldest event,
	// frees a unit. Within Effective the key can take no more than
	// Remaining. Never zero in a decision.
	Effective time.Duration
}

// Decision is the answer to one request.
type Decision struct {
	// Allowed is true if the request passes every limit.
	Allowed bool
	// Delay is, for a leaky bucket, how long to hold the request before
	// serving it. Zero otherwise.
	Delay time.Duration
	// RetryAfter is, when the request is denied, how long until the same
	// request would pass if the key took nothing else meanwhile. A request
	// that can never pass (its cost exceeds the limit, or the limit is
	// scaled to zero) gets the longest window. Zero when allowed.
	RetryAfter time.Duration
	// Quotas holds one entry per limit of the rule, in the rule's order;
	// Len says how many are set. The shortest limit's Remaining includes
	// the burst bucket in front of it.
	Quotas [MaxLimits]Quota
	// Len is the number of entries of Quotas in use.
	Len int
}

// Binding is the quota closest to running out (least remaining; the
// longer reset on a tie): the one to show where a single value is wanted.
func (d *Decision) Binding() Quota {
	best := 0
	for i := 1; i < d.Len; i++ {
		q, b := d.Quotas[i], d.Quotas[best]
		if q.Remaining < b.Remaining || (q.Remaining == b.Remaining && q.Reset > b.Reset) {
			best = i
		}
	}
	return d.Quotas[best]
}

// spent is true if the decision left the key without a unit of one of its
// limits (a denial for a cost above what is left is not spent).
func (d *Decision) spent() bool {
	for i := range d.Len {
		if d.Quotas[i].Remaining == 0 {
			return true
		}
	}
	return false
}

// deny records that a limit turned the request away, and when the request
// could pass again (the latest of the limits that denied it).
func (d *Decision) deny(retry int64) {
	d.Allowed = false
	if r := time.Duration(retry); r > d.RetryAfter {
		d.RetryAfter = r
	}
}
