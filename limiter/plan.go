package limiter

import (
	"math"
	"slices"
	"time"
)

// plan is a Config compiled for the hot path: where each limit keeps its
// state in a key's words, and the numbers every decision needs. A Limiter
// swaps plans atomically when it is reconfigured.
type plan struct {
	cfg      Config
	algo     Algorithm
	limits   []limitPlan
	burstAt  int   // the limit Burst shapes
	burstW   int   // first of the two words of the burst bucket in front of a window; 0: none
	shareW   int   // word of the share and demand; 0: none
	stride   int   // words per key, word 0 being the key's hash
	logs     int   // event logs per key (SlidingLog)
	oneLog   bool  // one sliding log, no burst bucket, no shares: logTake's rules
	maxDelay int64 // LeakyBucket
	longest  int64 // the longest window (ns)
	maxKeys  int
	starts   windowStarts // per limit (fast.go)
}

// limitPlan is one limit of a plan.
type limitPlan struct {
	n, w     int64      // Count per Window (ns)
	capacity int64      // TokenBucket: bucket size; LeakyBucket: queue depth
	word     int        // first state word (or event log index, for SlidingLog)
	ub       unitBucket // bucket algorithms, unscaled, in ns (fast.go)
	cal      *calendar  // a calendar period's fixed window; nil: a duration's
}

func newPlan(cfg Config) (*plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = slices.Clone(cfg.Limits) // the caller's slice may change
	p := &plan{cfg: cfg, algo: cfg.algorithm(), burstAt: cfg.shortest(), maxKeys: cfg.MaxKeys, stride: 1}
	if p.maxKeys == 0 {
		p.maxKeys = DefaultMaxKeys
	}
	p.maxDelay = int64(cfg.MaxDelay)
	if p.maxDelay == 0 {
		p.maxDelay = int64(DefaultMaxDelay)
	}
	for i, l := range cfg.Limits {
		lp := limitPlan{n: l.Count, w: int64(l.Window), capacity: l.Count}
		if i == p.burstAt && cfg.Burst > 0 && p.algo == TokenBucket {
			lp.capacity = cfg.Burst
		}
		if p.algo == LeakyBucket {
			lp.capacity = cfg.Burst
		}
		switch p.algo {
		case SlidingWindow, FixedWindow, TokenBucket, LeakyBucket:
			lp.word = p.stride
			p.stride += 2
		case SlidingLog:
			lp.word = p.logs
			p.logs++
		}
		lp.ub = newUnitBucket(p.algo, lp.n, lp.w, lp.capacity, p.maxDelay)
		if i < len(cfg.Periods) && cfg.Periods[i] != "" {
			lp.cal = newCalendar(cfg.Periods[i], cfg.Location)
		}
		p.limits = append(p.limits, lp)
		p.longest = max(p.longest, lp.w)
	}
	p.starts = make(windowStarts, len(p.limits))
	if cfg.Burst > 0 && p.windowed() {
		p.burstW = p.stride
		p.stride += 2
	}
	if cfg.Shares {
		p.shareW = p.stride
		p.stride++
	}
	p.oneLog = p.algo == SlidingLog && len(p.limits) == 1 && p.burstW == 0 && p.shareW == 0
	return p, nil
}

// windowed is true for the algorithms a burst bucket sits in front of.
func (p *plan) windowed() bool {
	return p.algo == SlidingWindow || p.algo == FixedWindow || p.algo == SlidingLog
}

// sameLayout is true if keys kept under q can be read under p: the same
// algorithm and the same words, whatever the counts and windows.
func (p *plan) sameLayout(q *plan) bool {
	return p.algo == q.algo && len(p.limits) == len(q.limits) && p.stride == q.stride &&
		p.burstW == q.burstW && p.shareW == q.shareW && p.logs == q.logs
}

// scaled is n×scale rounded down, at least 1 and at most MaxCount: a limit
// scaled to below one unit still admits one. A product within a relative
// 1e-7 (at most half a unit) under a whole number is taken as that number:
// it is float error (100×0.29 is 28.999999999999996; a share is kept as a
// float32), not a fraction anyone meant.
func scaled(n int64, scale float64) int64 {
	return ScaledCount(n, scale)
}

// ScaledCount is a limit of n at scale, as AllowScaledAt applies it: n×scale
// rounded down, at least 1 and at most MaxCount.
func ScaledCount(n int64, scale float64) int64 {
	if scale == 1 {
		return n
	}
	v := float64(n) * scale
	if !(v < MaxCount) { // also +Inf
		return MaxCount
	}
	if c := math.Ceil(v); c-v <= min(v*1e-7, 0.5) {
		v = c
	}
	return max(1, int64(v))
}

// fineUnits is how finely a token bucket's rate under a share is kept:
// in 1/fineUnits of a unit a window (bucketRate).
const fineUnits = 1024

// bucketRate is a token bucket limit's rate at scale, as n units per w
// ns: n×scale rounded down (scaled), but under Config.Shares at a scale
// other than 1, n×scale itself to 1/fineUnits of a unit, over a window
// fineUnits times longer (fewer times if that would pass maxSpan or
// MaxCount). Rounded down, a share of a tenth of 100 a second lost up to
// a unit a second on every node: ten nodes sharing L = 100/s admitted a
// median second of 0.92–0.99×L (gossip/sim, seeds 1–6), 0.96–1.01 with
// the rate kept whole. A rate below one unit a window is one, as scaled.
// The bucket's TAT is a time, the same in either form; its fraction is
// in n-ths of a nanosecond and read under another n as at most n−1.
func (p *plan) bucketRate(lp *limitPlan, scale float64) (w, n int64) {
	v := float64(lp.n) * scale
	if p.shareW == 0 || scale == 1 || p.algo != TokenBucket || !(v > 1) || !(v < MaxCount) {
		return lp.w, scaled(lp.n, scale)
	}
	k := int64(fineUnits)
	for k > 1 && (lp.w > maxSpan/k || v*float64(k) >= MaxCount) {
		k /= 2
	}
	return lp.w * k, int64(v * float64(k))
}

// decide runs every limit of p on a key's words and logs. If all pass and
// take is set, it writes the new state; otherwise it leaves the key as it
// was. The quotas reported are the state the
// decision leaves: after the request if it passed, before it if not.
//
// A cost of 0 is allowed (even if the key is over a limit that shrank) and
// takes nothing; a cost above MaxCount is denied by every limit.
//
// It writes into *d, which must be zero but for Quotas, whose entries it
// sets (the first Len) are overwritten: a Decision is large, and is not
// copied on the way.
func (p *plan) decide(d *Decision, words []uint64, logs []eventLog, now, cost int64, scale float64, take bool) {
	d.Allowed, d.Len = true, len(p.limits)
	cost = min(max(cost, 0), MaxCount+1) // no limit holds more than MaxCount: no overflow
	if cost == 0 {
		take = false
	}
	if p.shareW != 0 {
		scale *= shareOf(words[p.shareW])
		if take {
			words[p.shareW] = addDemand(words[p.shareW], cost)
		}
	}
	if scale <= 0 || math.IsNaN(scale) {
		p.blocked(d)
		return
	}
	if take && scale != 1 {
		p.atMostFull(words, now, scale)
	}
	if len(p.limits) == 1 && p.burstW == 0 {
		// every leaky bucket (one limit, no burst bucket) takes this path:
		// only decideOne reports a Delay
		p.decideOne(d, words, logs, now, cost, scale, take)
		return
	}
	var next [MaxLimits][2]uint64 // each limit's words after the request
	var ok uint                   // bit i: limit i has room
	never := false                // some limit can never admit the request
	var s step
	for i := range p.limits {
		p.step(&s, i, words, logs, now, cost, scale)
		if s.ok {
			ok |= 1 << i
		} else {
			d.deny(s.retry)
			never = never || s.never
		}
		next[i] = [2]uint64{s.a, s.b}
		d.Quotas[i] = s.quota
	}
	var burst step
	if p.burstW != 0 {
		p.burstStep(&burst, words, now, cost, scale)
		if !burst.ok {
			d.deny(burst.retry)
			never = never || burst.never
		}
	}
	if never {
		d.RetryAfter = time.Duration(p.longest)
	}
	if !d.Allowed && cost > 0 {
		// Nothing is taken: the limits that had room report it untaken.
		for i := range p.limits {
			if ok&(1<<i) != 0 {
				p.step(&s, i, words, logs, now, 0, scale)
				d.Quotas[i] = s.quota
			}
		}
		if burst.ok {
			p.burstStep(&burst, words, now, 0, scale)
		}
	}
	if p.burstW != 0 {
		// the window and its burst bucket report as one: the fewer units
		// left, and the time the binding one frees its next (both on a tie)
		q, b := &d.Quotas[p.burstAt], &burst.quota
		switch {
		case b.Remaining < q.Remaining:
			q.Remaining, q.Effective = b.Remaining, b.Effective
		case b.Remaining == q.Remaining:
			q.Effective = max(q.Effective, b.Effective)
		}
	}
	if cost == 0 { // takes nothing, so nothing can deny it
		d.Allowed, d.RetryAfter = true, 0
	}
	if !d.Allowed || !take {
		return
	}
	for i, lp := range p.limits {
		switch p.algo {
		case SlidingWindow, FixedWindow, TokenBucket, LeakyBucket:
			words[lp.word], words[lp.word+1] = next[i][0], next[i][1]
		case SlidingLog:
			logAdmit(&logs[lp.word], now, lp.w, cost)
		}
	}
	if p.burstW != 0 {
		words[p.burstW], words[p.burstW+1] = burst.a, burst.b
	}
}

// decideOne is decide for the common rule: one limit, no burst bucket.
// With one limit, the step's own state is the one to write, and a denied
// step's quota is already the untaken one.
func (p *plan) decideOne(d *Decision, words []uint64, logs []eventLog, now, cost int64, scale float64, take bool) {
	var s step
	p.step(&s, 0, words, logs, now, cost, scale)
	d.Quotas[0] = s.quota
	switch {
	case cost == 0: // takes nothing, so nothing can deny it
		return
	case !s.ok:
		d.Allowed = false
		d.RetryAfter = time.Duration(s.retry)
		if s.never {
			d.RetryAfter = time.Duration(p.longest)
		}
		return
	}
	d.Delay = time.Duration(s.delay)
	if !take {
		return
	}
	if lp := p.limits[0]; p.algo == SlidingLog {
		logAdmit(&logs[lp.word], now, lp.w, cost)
	} else {
		words[lp.word], words[lp.word+1] = s.a, s.b
	}
}

// step runs limit i of p on a key's words and logs into *s, taking
// nothing.
func (p *plan) step(s *step, i int, words []uint64, logs []eventLog, now, cost int64, scale float64) {
	lp := &p.limits[i]
	n := scaled(lp.n, scale)
	switch p.algo {
	case SlidingWindow:
		if a, b := words[lp.word], words[lp.word+1]; p.shareW != 0 {
			slidingShared(s, a, b, now, keyWindow(a, b, now, lp.w), lp.w, n, cost)
		} else {
			slidingWindow(s, a, b, now, p.starts.at(i, now, lp.w), lp.w, n, cost)
		}
	case FixedWindow:
		cur, w := p.fixedAt(i, words[lp.word], now)
		fixedWindow(s, words[lp.word], words[lp.word+1], now, cur, w, n, cost)
	case SlidingLog:
		slidingLog(s, &logs[lp.word], now, lp.w, n, cost)
	case TokenBucket:
		if scale == 1 && lp.ub.unit != 0 && words[lp.word+1] == 0 && cost <= lp.capacity &&
			lp.ub.token(s, words[lp.word], now, lp.w, n, cost) {
			return
		}
		w, fn := p.bucketRate(lp, scale)
		tokenBucket(s, words[lp.word], words[lp.word+1], now, w, fn, p.depth(lp.capacity, scale), cost, scale != 1)
		s.quota.Limit, s.quota.Window = n, time.Duration(lp.w)
	case LeakyBucket:
		depth := int64(0)
		if lp.capacity > 0 {
			depth = scaled(lp.capacity, scale)
		}
		if scale == 1 && lp.ub.unit != 0 && words[lp.word+1] == 0 && cost <= n &&
			lp.ub.leaky(s, words[lp.word], now, lp.w, n, cost) {
			return
		}
		leakyBucket(s, words[lp.word], words[lp.word+1], now, lp.w, n, depth, p.maxDelay, cost)
	}
}

// atMostFull makes a key's token buckets (its limits' and its burst
// bucket) no more than full at scale (a scale other than 1).
func (p *plan) atMostFull(words []uint64, now int64, scale float64) {
	if p.algo == TokenBucket {
		for i := range p.limits {
			lp := &p.limits[i]
			w, n := p.bucketRate(lp, scale)
			atMostFull(&words[lp.word], &words[lp.word+1], now, w, n, p.depth(lp.capacity, scale))
		}
	}
	if p.burstW != 0 {
		lp := &p.limits[p.burstAt]
		atMostFull(&words[p.burstW], &words[p.burstW+1], now, lp.w, scaled(lp.n, scale), p.depth(p.cfg.Burst, scale))
	}
}

// burstStep runs the burst bucket in front of a window into *s, taking
// nothing.
func (p *plan) burstStep(s *step, words []uint64, now, cost int64, scale float64) {
	lp := &p.limits[p.burstAt]
	tokenBucket(s, words[p.burstW], words[p.burstW+1], now, lp.w, scaled(lp.n, scale), p.depth(p.cfg.Burst, scale), cost, scale != 1)
}

// MinShareDepth is the fewest units a token bucket of capacity c holds
// under a cluster share (Config.Shares), unless c itself is smaller.
// A share scales a bucket's rate and its capacity: a node whose share is
// a tenth of L=100 with a burst of 10 would hold one token, and a bucket
// of one token refilled at r and asked at 2r admits 2r/3 when requests
// come at random (it stays full, wasting its refill, until the next
// request). Three tokens keep what such a node admits within a few
// percent of its share, for at most 3 units per node above the burst.
const MinShareDepth = 3

// depth is a token bucket's capacity c at scale: c scaled and, under
// Config.Shares (whose scale holds the share, given to AllowScaledAt or
// set by SetShareAt), at least min(c, MinShareDepth).
func (p *plan) depth(c int64, scale float64) int64 {
	d := scaled(c, scale)
	if p.shareW != 0 {
		d = max(d, min(c, MinShareDepth))
	}
	return d
}

// blocked is the decision for a limit scaled to zero: nothing passes.
func (p *plan) blocked(d *Decision) {
	d.Allowed = false
	for i, lp := range p.limits {
		d.Quotas[i] = Quota{Window: time.Duration(lp.w), Effective: time.Duration(lp.w)}
	}
	d.RetryAfter = time.Duration(p.longest)
}

// idle is true if a key's state is no different from a new key's at now:
// such a key can be dropped without anyone noticing. A key with a share or
// an untaken demand is never idle.
func (p *plan) idle(words []uint64, logs []eventLog, now int64) bool {
	if p.shareW != 0 && words[p.shareW] != 0 {
		return false
	}
	for i, lp := range p.limits {
		switch p.algo {
		case FixedWindow:
			if words[lp.word+1] > 0 && int64(words[lp.word]) >= p.windowStart(i, now) {
				return false
			}
		case SlidingWindow:
			if int64(words[lp.word])+2*lp.w > now && words[lp.word+1] > 0 {
				return false
			}
		case TokenBucket, LeakyBucket:
			if !bucketIdle(words[lp.word], words[lp.word+1], now) {
				return false
			}
		case SlidingLog:
			if logs[lp.word].newest() > now-lp.w {
				return false
			}
		}
	}
	return p.burstW == 0 || bucketIdle(words[p.burstW], words[p.burstW+1], now)
}
