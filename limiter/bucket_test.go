package limiter

import (
	"testing"
	"time"
)

// 3 per 10s does not divide into whole nanoseconds: a unit costs
// 3333333333⅓ns, and the bucket still holds exactly 3 and refills in
// exactly 10s.
func TestTokenBucket(t *testing.T) {
	l := mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{3, 10 * s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: 3333333334 * ns},
		{at: 0, cost: 1, ok: true, rem: 1, reset: 6666666667 * ns},
		{at: 0, cost: 1, ok: true, rem: 0, reset: 10 * s1},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 10 * s1, retry: 3333333334 * ns},
		{at: 3333333333 * ns, cost: 1, ok: false, rem: 0, reset: 6666666667 * ns, retry: ns},
		{at: 3333333334 * ns, cost: 1, ok: true, rem: 0, reset: 10 * s1},
		// full again at 13333333333⅓ns
		{at: 20 * s1, cost: 1, ok: true, rem: 2, reset: 3333333334 * ns},
		{at: 20 * s1, cost: 2, ok: true, rem: 0, reset: 10 * s1},
		// more than the capacity never passes
		{at: 20 * s1, cost: 4, ok: false, rem: 0, reset: 10 * s1, retry: 10 * s1},
		{at: 20 * s1, cost: 0, ok: true, rem: 0, reset: 10 * s1},
		{at: 20 * s1, cost: -3, ok: true, rem: 0, reset: 10 * s1},
		// time going backwards: the bucket is further from full, never nearer
		{at: 15 * s1, cost: 1, ok: false, rem: 0, reset: 15 * s1, retry: 8333333334 * ns},
		{at: 30 * s1, cost: 3, ok: true, rem: 0, reset: 10 * s1},
	})
}

// A client pacing itself at exactly N per W is never denied.
func TestTokenBucketExactRate(t *testing.T) {
	for _, lim := range []Limit{{3, 10 * s1}, {7, s1}, {1000, 10 * s1}, {9, time.Minute}} {
		l := mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{lim}})
		for w := range int64(5) {
			now := base.Add(time.Duration(w) * lim.Window)
			for i := range lim.Count {
				if d := l.AllowAt("k", now, 1); !d.Allowed {
					t.Fatalf("%v: window %d request %d denied, RetryAfter %v", lim, w, i, d.RetryAfter)
				}
			}
			if d := l.AllowAt("k", now, 1); d.Allowed || d.Quotas[0].Reset != lim.Window {
				t.Fatalf("%v: window %d: one more: allowed %v, Reset %v, want denied and %v", lim, w, d.Allowed, d.Quotas[0].Reset, lim.Window)
			}
		}
		// paced one unit every W/N (rounded up): never denied
		l = mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{lim}, Burst: 1})
		step := (lim.Window + time.Duration(lim.Count) - 1) / time.Duration(lim.Count)
		for i := range 10 * lim.Count {
			if d := l.AllowAt("k", base.Add(time.Duration(i)*step), 1); !d.Allowed {
				t.Fatalf("%v: paced request %d denied, RetryAfter %v", lim, i, d.RetryAfter)
			}
		}
	}
}

// A bucket left further ahead than a full one by a smaller scale (a
// cluster share that was a sliver: one unit then costs a whole second)
// counts as full at a larger scale, not as a debt of a second. (Unscaled,
// as when the clock goes back, the TAT is kept: see TestTokenBucket.)
func TestTokenBucketScaleRise(t *testing.T) {
	l := mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{200, s1}}, Burst: 20})
	if d := l.AllowScaledAt("k", base, 1, 0.005); !d.Allowed || d.Quotas[0].Reset != s1 {
		t.Fatalf("at scale 0.005 (1 per second): %+v", d)
	}
	// at scale 0.8 the bucket holds 16 units of 6.25ms: the TAT 1s ahead
	// is a full bucket
	d := l.AllowScaledAt("k", base, 1, 0.8)
	if d.Allowed || d.RetryAfter != 6250*time.Microsecond || d.Quotas[0].Reset != 100*ms {
		t.Fatalf("at scale 0.8, at once: allowed %v, RetryAfter %v, Reset %v; want denied, 6.25ms, 100ms", d.Allowed, d.RetryAfter, d.Quotas[0].Reset)
	}
	if d := l.AllowScaledAt("k", base.Add(6250*time.Microsecond), 1, 0.8); !d.Allowed {
		t.Fatalf("at scale 0.8, 6.25ms later: denied, RetryAfter %v", d.RetryAfter)
	}
}

func TestTokenBucketBurst(t *testing.T) {
	l := mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{10, s1}}, Burst: 5})
	run(t, l, []tstep{
		{at: 0, cost: 5, ok: true, rem: 0, reset: 500 * ms},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 500 * ms, retry: 100 * ms},
		{at: 100*ms - ns, cost: 1, ok: false, rem: 0, reset: 400*ms + ns, retry: ns},
		{at: 100 * ms, cost: 1, ok: true, rem: 0, reset: 500 * ms},
		{at: 100 * ms, cost: 6, ok: false, rem: 0, reset: 500 * ms, retry: s1},
		{at: 2 * s1, cost: 5, ok: true, rem: 0, reset: 500 * ms},
	})
	// a burst above the limit: 15 back to back, then 10 per second
	l = mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{10, s1}}, Burst: 15})
	run(t, l, []tstep{
		{at: 0, cost: 12, ok: true, rem: 3, reset: 1200 * ms},
		{at: 0, cost: 3, ok: true, rem: 0, reset: 1500 * ms},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 1500 * ms, retry: 100 * ms},
		{at: 1500 * ms, cost: 15, ok: true, rem: 0, reset: 1500 * ms},
	})
}

// nginx limit_req burst=2 rate=10r/s without nodelay: 3 pass back to back,
// delayed 0, 100ms and 200ms; the 4th is rejected.
func TestLeakyBucket(t *testing.T) {
	l := mustNew(t, Config{Algorithm: LeakyBucket, Limits: []Limit{{10, s1}}, Burst: 2})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: 100 * ms},
		{at: 0, cost: 1, ok: true, rem: 1, reset: 200 * ms, delay: 100 * ms},
		{at: 0, cost: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 300 * ms, retry: 100 * ms},
		{at: 100*ms - ns, cost: 1, ok: false, rem: 0, reset: 200*ms + ns, retry: ns},
		{at: 100 * ms, cost: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
		// more than the limit never passes; cost 0 is neither queued nor delayed
		{at: 100 * ms, cost: 11, ok: false, rem: 0, reset: 300 * ms, retry: s1},
		{at: 100 * ms, cost: 0, ok: true, rem: 0, reset: 300 * ms},
		// time going backwards: the queue is longer, never shorter
		{at: 50 * ms, cost: 1, ok: false, rem: 0, reset: 350 * ms, retry: 150 * ms},
		{at: s1, cost: 1, ok: true, rem: 2, reset: 100 * ms},
		// a request of several units takes several turns
		{at: 2 * s1, cost: 2, ok: true, rem: 1, reset: 200 * ms},
		{at: 2 * s1, cost: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
	})
}

// Without a queue depth, MaxDelay alone bounds the wait.
func TestLeakyBucketMaxDelay(t *testing.T) {
	l := mustNew(t, Config{Algorithm: LeakyBucket, Limits: []Limit{{10, s1}}, MaxDelay: 250 * ms})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: 100 * ms},
		{at: 0, cost: 1, ok: true, rem: 1, reset: 200 * ms, delay: 100 * ms},
		{at: 0, cost: 1, ok: true, rem: 0, reset: 300 * ms, delay: 200 * ms},
		{at: 0, cost: 1, ok: false, rem: 0, reset: 300 * ms, retry: 50 * ms},
		{at: 50 * ms, cost: 1, ok: true, rem: 0, reset: 350 * ms, delay: 250 * ms},
	})
	// the default MaxDelay is 1s: 11 pass back to back at 10/s
	l = mustNew(t, Config{Algorithm: LeakyBucket, Limits: []Limit{{10, s1}}})
	for i := range 11 {
		d := l.AllowAt("k", base, 1)
		if !d.Allowed || d.Delay != time.Duration(i)*100*ms {
			t.Fatalf("request %d: allowed %v delay %v, want true %v", i, d.Allowed, d.Delay, time.Duration(i)*100*ms)
		}
	}
	if d := l.AllowAt("k", base, 1); d.Allowed || d.RetryAfter != 100*ms {
		t.Fatalf("request 11: allowed %v RetryAfter %v, want false 100ms", d.Allowed, d.RetryAfter)
	}
}

// A rate that does not divide into nanoseconds: delays are rounded up,
// never down, and do not drift.
func TestLeakyBucketUneven(t *testing.T) {
	l := mustNew(t, Config{Algorithm: LeakyBucket, Limits: []Limit{{3, s1}}, Burst: 2})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: 333333334 * ns},
		{at: 0, cost: 1, ok: true, rem: 1, reset: 666666667 * ns, delay: 333333334 * ns},
		{at: 0, cost: 1, ok: true, rem: 0, reset: s1, delay: 666666667 * ns},
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: 333333334 * ns},
		{at: s1, cost: 3, ok: true, rem: 0, reset: s1},
		{at: 2 * s1, cost: 1, ok: true, rem: 2, reset: 333333334 * ns},
	})
}
