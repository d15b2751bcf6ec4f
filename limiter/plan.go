package limiter

import (
	"math"
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
	burstW   int   // word of the burst bucket's TAT in front of a window; 0: none
	shareW   int   // word of the share and demand; 0: none
	stride   int   // words per key, word 0 being the key's hash
	logs     int   // event logs per key (SlidingLog)
	maxDelay int64 // LeakyBucket
	maxKeys  int
}

// limitPlan is one limit of a plan.
type limitPlan struct {
	n, w     int64 // Count per Window (ns)
	capacity int64 // TokenBucket: bucket size; LeakyBucket: queue depth
	word     int   // first state word (or event log index, for SlidingLog)
}

func newPlan(cfg Config) (*plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
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
		case SlidingWindow, FixedWindow:
			lp.word = p.stride
			p.stride += 2
		case TokenBucket, LeakyBucket:
			lp.word = p.stride
			p.stride++
		case SlidingLog:
			lp.word = p.logs
			p.logs++
		}
		p.limits = append(p.limits, lp)
	}
	if cfg.Burst > 0 && p.windowed() {
		p.burstW = p.stride
		p.stride++
	}
	if cfg.Shares {
		p.shareW = p.stride
		p.stride++
	}
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

// scaled is n×scale rounded down, at least 1: a limit scaled to below one
// unit still admits one.
func scaled(n int64, scale float64) int64 {
	if scale == 1 {
		return n
	}
	return max(1, min(int64(math.Floor(float64(n)*scale)), MaxCount))
}

// decide runs every limit of p on a key's words and logs. If all pass and
// take is set, it writes the new state; otherwise it leaves the key as it
// was (but for expiring old events).
func (p *plan) decide(words []uint64, logs []eventLog, now, cost int64, scale float64, take bool) Decision {
	d := Decision{Allowed: true, Len: len(p.limits)}
	if p.shareW != 0 {
		scale *= shareOf(words[p.shareW])
		if take {
			words[p.shareW] = addDemand(words[p.shareW], cost)
		}
	}
	if scale <= 0 || math.IsNaN(scale) {
		return p.blocked(d)
	}
	var steps [MaxLimits]step
	for i, lp := range p.limits {
		n := scaled(lp.n, scale)
		var s step
		switch p.algo {
		case SlidingWindow:
			s = slidingWindow(words[lp.word], words[lp.word+1], now, lp.w, n, cost)
		case FixedWindow:
			s = fixedWindow(words[lp.word], words[lp.word+1], now, lp.w, n, cost)
		case SlidingLog:
			s = slidingLog(&logs[lp.word], now, lp.w, n, cost)
		case TokenBucket:
			s = tokenBucket(words[lp.word], now, lp.w, n, scaled(lp.capacity, scale), cost)
		case LeakyBucket:
			depth := int64(0)
			if lp.capacity > 0 {
				depth = scaled(lp.capacity, scale)
			}
			s = leakyBucket(words[lp.word], now, lp.w, n, depth, p.maxDelay, cost)
			d.Delay = time.Duration(s.delay)
		}
		if !s.ok {
			d.deny(s.retry)
		}
		steps[i] = s
		d.Quotas[i] = s.quota
	}
	var burst step
	if p.burstW != 0 {
		lp := p.limits[p.burstAt]
		burst = tokenBucket(words[p.burstW], now, lp.w, scaled(lp.n, scale), scaled(p.cfg.Burst, scale), cost)
		if !burst.ok {
			d.deny(burst.retry)
		}
		q := &d.Quotas[p.burstAt]
		q.Remaining = min(q.Remaining, burst.quota.Remaining)
	}
	if !d.Allowed {
		d.Delay = 0
		return d
	}
	if !take {
		return d
	}
	for i, lp := range p.limits {
		s := steps[i]
		switch p.algo {
		case SlidingWindow, FixedWindow:
			words[lp.word], words[lp.word+1] = s.a, s.b
		case TokenBucket, LeakyBucket:
			words[lp.word] = s.a
		case SlidingLog:
			if cost > 0 {
				l := &logs[lp.word]
				l.push(max(now, l.newest()), cost)
			}
		}
	}
	if p.burstW != 0 {
		words[p.burstW] = burst.a
	}
	return d
}

// blocked is the decision for a limit scaled to zero: nothing passes.
func (p *plan) blocked(d Decision) Decision {
	d.Allowed = false
	for i, lp := range p.limits {
		d.Quotas[i] = Quota{Window: time.Duration(lp.w)}
		d.RetryAfter = max(d.RetryAfter, time.Duration(lp.w))
	}
	return d
}

// refund gives back cost units that decide took at about now.
func (p *plan) refund(words []uint64, logs []eventLog, now, cost int64, scale float64) {
	if p.shareW != 0 {
		scale *= shareOf(words[p.shareW])
	}
	if scale <= 0 || math.IsNaN(scale) || cost <= 0 {
		return
	}
	for _, lp := range p.limits {
		switch p.algo {
		case SlidingWindow:
			words[lp.word], words[lp.word+1] = refundSlidingWindow(words[lp.word], words[lp.word+1], now, lp.w, cost)
		case FixedWindow:
			words[lp.word], words[lp.word+1] = refundFixedWindow(words[lp.word], words[lp.word+1], now, lp.w, cost)
		case SlidingLog:
			logs[lp.word].unpush(cost)
		case TokenBucket, LeakyBucket:
			words[lp.word] = refundBucket(words[lp.word], now, lp.w, scaled(lp.n, scale), cost)
		}
	}
	if p.burstW != 0 {
		lp := p.limits[p.burstAt]
		words[p.burstW] = refundBucket(words[p.burstW], now, lp.w, scaled(lp.n, scale), cost)
	}
}

// idle is true if a key's state is no different from a new key's at now:
// such a key can be dropped without anyone noticing.
func (p *plan) idle(words []uint64, logs []eventLog, now int64) bool {
	for _, lp := range p.limits {
		switch p.algo {
		case FixedWindow:
			if int64(words[lp.word])+lp.w > now && words[lp.word+1] > 0 {
				return false
			}
		case SlidingWindow:
			if int64(words[lp.word])+2*lp.w > now && words[lp.word+1] > 0 {
				return false
			}
		case TokenBucket, LeakyBucket:
			if int64(words[lp.word]) > now {
				return false
			}
		case SlidingLog:
			if logs[lp.word].newest() > now-lp.w {
				return false
			}
		}
	}
	return p.burstW == 0 || int64(words[p.burstW]) <= now
}
