package caddymodule

import (
	"sync"
	"sync/atomic"

	"github.com/edgebyte/edgelimit/topkeys"
)

// ruleStats is what a rule has decided since its name came into use. It
// belongs to the rule's name in the registry, like the counters, so it
// survives config reloads.
type ruleStats struct {
	// Requests by decision. Each counter has a cache line of its own, so
	// that cores counting different decisions do not slow each other.
	allowed      paddedCounter
	denied       paddedCounter // 429s, and 403s for a missing key with on_missing_key deny
	shadowDenied paddedCounter // would have been denied; served (shadow)
	exempt       paddedCounter // the rule's matchers matched, but the client is exempt

	// busiest counts the units each key asked for, allowed or not.
	busiest *topkeys.Sketch
	// mostDenied counts each key's denied requests; made at the first
	// denial, as most rules deny rarely.
	mostDenied     atomic.Pointer[topkeys.Sketch]
	mostDeniedOnce sync.Once
}

// paddedCounter is an atomic counter alone on its cache line.
type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

func newRuleStats() *ruleStats {
	return &ruleStats{busiest: topkeys.New(topkeys.DefaultCapacity)}
}

// decided counts a decision on key: the units it asked for, and whether
// it was denied.
func (s *ruleStats) decided(key string, cost int64, allowed, shadow bool) {
	switch {
	case allowed:
		s.allowed.Add(1)
	case shadow:
		s.shadowDenied.Add(1)
	default:
		s.denied.Add(1)
	}
	if cost > 0 {
		s.busiest.Add(key, uint64(cost))
	}
	if !allowed {
		s.deniedSketch().Add(key, 1)
	}
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

// statsSnapshot is a rule's counts at one moment.
type statsSnapshot struct {
	Allowed      uint64 `json:"allowed"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
	Exempt       uint64 `json:"exempt"`
}

func (s *ruleStats) snapshot() statsSnapshot {
	return statsSnapshot{
		Allowed:      s.allowed.Load(),
		Denied:       s.denied.Load(),
		ShadowDenied: s.shadowDenied.Load(),
		Exempt:       s.exempt.Load(),
	}
}
