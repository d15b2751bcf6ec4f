package caddymodule

import (
	"sync"
	"sync/atomic"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
	"github.com/edgebyte/edgelimit/topkeys"
)

// ruleStats is what a rule has decided since its name came into use. It
// belongs to the rule's name in the registry, like the counters, so it
// survives config reloads.
type ruleStats struct {
	// Requests by decision, each striped over cache lines so that cores
	// counting requests of different keys do not slow each other.
	allowed      stripedCounter
	denied       stripedCounter // 429s, and 403s for a missing key with on_missing_key deny
	shadowDenied stripedCounter // would have been denied; served (shadow)
	exempt       stripedCounter // the rule's matchers matched, but the client is exempt

	// busiest counts the units each key asked for, allowed or not.
	busiest *topkeys.Sketch
	// mostDenied counts each key's denied requests; made at the first
	// denial, as most rules deny rarely.
	mostDenied     atomic.Pointer[topkeys.Sketch]
	mostDeniedOnce sync.Once

	// fallbacks counts, by on_store_error mode (storeModes), the requests
	// of a rule with store redis that Redis could not decide.
	fallbacks [len(storeModes)]atomic.Uint64

	// held is how many requests of the rule a leaky bucket holds now,
	// over every config that uses the rule's name (held requests of a
	// config being replaced still count).
	held atomic.Int64

	// store counts how a rule with store redis had its requests decided:
	// by a call, coalesced into another request's call, or by the
	// over-limit cache.
	store redisstore.Counters

	// abuse counts blocks made in Redis and cost_header errors (blocks.go).
	abuse abuseCounters

	// observe is told of every decision by a replay (virtual.go); nil
	// when live.
	observe *observed
}

// paddedCounter is an atomic counter alone on its cache line.
type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

// stripedCounter is a counter spread over stripes, one cache line each.
type stripedCounter [8]paddedCounter

// add adds 1 to the stripe of key and returns the stripe's new count.
func (c *stripedCounter) add(key string) uint64 {
	i := len(key)
	if i > 0 {
		i += int(key[len(key)-1]) // cheap, and varies between clients' keys
	}
	return c[i&(len(c)-1)].Add(1)
}

// Load returns the count.
func (c *stripedCounter) Load() uint64 {
	var n uint64
	for i := range c {
		n += c[i].Load()
	}
	return n
}

func newRuleStats() *ruleStats {
	return &ruleStats{busiest: topkeys.New(topkeys.DefaultCapacity)}
}

// decided counts a decision on key: the units it asked for, and whether
// it was denied. It reports whether the request is one to time for
// caddy_rate_limit_decision_seconds: one in decisionSample of the rule's
// decisions (of a stripe), picked by the count just taken: no extra
// shared state.
func (s *ruleStats) decided(key string, cost int64, allowed, shadow bool) (timed bool) {
	var n uint64
	switch {
	case allowed:
		n = s.allowed.add(key)
	case shadow:
		n = s.shadowDenied.add(key)
	default:
		n = s.denied.add(key)
	}
	if cost > 0 {
		s.busiest.Add(key, uint64(min(cost, limiter.MaxCount+1))) // a cost above any limit counts as that
	}
	if !allowed {
		s.deniedSketch().Add(key, 1)
	}
	if o := s.observe; o != nil {
		o.o.Decided(o.rule, key, cost, allowed)
	}
	return n%decisionSample == 0
}

// deniedSketch is mostDenied, made on first use.
func (s *ruleStats) deniedSketch() *topkeys.Sketch {
	if d := s.mostDenied.Load(); d != nil {
		return d
	}
	s.mostDeniedOnce.Do(func() { s.mostDenied.Store(topkeys.New(topkeys.DefaultCapacity)) })
	return s.mostDenied.Load()
}

// forget drops key from the top-keys sketches (its state was reset).
func (s *ruleStats) forget(key string) {
	s.busiest.Reset(key)
	if d := s.mostDenied.Load(); d != nil {
		d.Reset(key)
	}
}

// RequestCounts are a rule's counts of requests at one moment.
type RequestCounts struct {
	Allowed      uint64 `json:"allowed"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
	Exempt       uint64 `json:"exempt"`
}

func (s *ruleStats) snapshot() RequestCounts {
	return RequestCounts{
		Allowed:      s.allowed.Load(),
		Denied:       s.denied.Load(),
		ShadowDenied: s.shadowDenied.Load(),
		Exempt:       s.exempt.Load(),
	}
}

// hold takes one of max places for a held request, and reports whether
// there was one.
func (s *ruleStats) hold(max int64) bool {
	if s.held.Add(1) > max {
		s.held.Add(-1)
		return false
	}
	return true
}
