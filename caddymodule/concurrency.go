package caddymodule

// max_concurrent: at most N requests of a key in flight at once. A rule's
// in-flight counts (limiter.InFlight) live in the registry beside its
// limiter, one per rule name for the process, so a reload that keeps the
// rule keeps them, and the requests admitted before it release into the
// same counts. A request takes its place at its rule's turn, after the
// rule's limits passed, and gives it back when the handler chain returns:
// the response written, the client gone, or a hijacked connection (a
// WebSocket through reverse_proxy) closed.

import (
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// concurrentSuffix names the concurrency side of a rule in the cluster's
// sharing, apart from its rate side: a rule may have both.
const concurrentSuffix = "#concurrent"

// concurrency is a rule's max_concurrent state, process-wide by rule name.
type concurrency struct {
	inFlight *limiter.InFlight
	unleased *limiter.InFlight // store redis: those the local fallback admitted (concurrency_store.go)
	refused  atomic.Uint64     // requests refused at N
	full     atomic.Uint64     // requests refused: the table of keys full
}

// newConcurrency returns a rule's max_concurrent state with nothing in
// flight, bounded to maxKeys keys (0: the default).
func newConcurrency(maxKeys int) *concurrency {
	return &concurrency{inFlight: limiter.NewInFlight(maxKeys), unleased: limiter.NewInFlight(maxKeys)}
}

// concurrencyFor returns the max_concurrent state of rule name, made on
// first use; the name must be acquired (limiterFor). maxKeys bounds its
// keys in flight from now.
func (rs *rules) concurrencyFor(name string, maxKeys int) *concurrency {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s := rs.byName[name]
	if s.conc == nil {
		s.conc = newConcurrency(maxKeys)
	} else {
		s.conc.inFlight.SetMaxKeys(maxKeys)
		s.conc.unleased.SetMaxKeys(maxKeys)
	}
	return s.conc
}

// concurrencyOf is the max_concurrent state of rule name, or nil.
func (rs *rules) concurrencyOf(name string) *concurrency {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if s, ok := rs.byName[name]; ok {
		return s.conc
	}
	return nil
}

// ruleConcurrency is what a provisioned rule with max_concurrent needs per
// request.
type ruleConcurrency struct {
	*concurrency
	hash   uint64   // gossip.KeyHash(name + concurrentSuffix), with scope cluster
	name   string   // its policy name in the headers
	policy string   // RateLimit-Policy at scale 1
	free   []string // RateLimit items by places free, 0 to N (N ≤ 64), at scale 1
}

// provisionConcurrency sets up ru's max_concurrent, after its limiter.
func (ru *rule) provisionConcurrency() {
	if ru.MaxConcurrent == 0 {
		return
	}
	ru.setConcurrency(registry.concurrencyFor(ru.Name, ru.MaxKeys))
}

// setConcurrency sets ru's max_concurrent to count its requests in state.
func (ru *rule) setConcurrency(state *concurrency) {
	c := &ruleConcurrency{concurrency: state, name: sfString(ru.Name)}
	if !ru.ConcurrentOnly() {
		c.name += "-concurrent"
	}
	if ru.clustered {
		c.hash = gossip.KeyHash(ru.Name + concurrentSuffix)
	}
	n := int64(ru.MaxConcurrent)
	c.policy = concurrentPolicy(c.name, n)
	if n <= 64 {
		c.free = make([]string, n+1)
		for i := range c.free {
			c.free[i] = concurrentItem(c.name, int64(i))
		}
	}
	ru.conc = c
}

// concurrentPolicy is the RateLimit-Policy item of N requests in flight.
func concurrentPolicy(name string, n int64) string {
	return `"` + name + `";q=` + strconv.FormatInt(n, 10) + `;qu="concurrent-requests"`
}

// concurrentItem is the RateLimit item of free places.
func concurrentItem(name string, free int64) string {
	return `"` + name + `";r=` + strconv.FormatInt(free, 10)
}

// setConcurrentHeaders writes the rule's max_concurrent headers: n places
// in all at this request's scale, free of them left. The legacy headers
// are written for a rule with max_concurrent alone (a rule with limits
// shows its binding limit there).
func (ru *rule) setConcurrentHeaders(h http.Header, n, free int64) {
	c := ru.conc
	free = max(free, 0)
	if ru.ietf {
		var item, policy string
		if n == int64(ru.MaxConcurrent) && free < int64(len(c.free)) {
			item, policy = c.free[free], c.policy
		} else {
			item, policy = concurrentItem(c.name, free), concurrentPolicy(c.name, n)
		}
		addHeaders(h, item, policy)
	}
	if ru.legacy && ru.ConcurrentOnly() {
		h[hdrLimit] = []string{strconv.FormatInt(n, 10)}
		h[hdrRemaining] = []string{strconv.FormatInt(free, 10)}
		h[hdrReset] = []string{"0"}
	}
}

// inFlightSlots are the places a request holds in its rules'
// max_concurrent, released together when the handler returns.
type inFlightSlots struct {
	inline[limiter.Slot]
	leases []heldLease // store redis (concurrency_store.go)
}

// release gives every place back; a second call does nothing.
func (s *inFlightSlots) release() {
	s.each(func(sl *limiter.Slot) { sl.Release() })
	for _, l := range s.leases {
		l.release()
	}
	*s = inFlightSlots{}
}

// admitOutcome is what a rule's max_concurrent made of a request.
type admitOutcome uint8

const (
	concAdmitted    admitOutcome = iota
	concRefused                  // the key has its N in flight
	concFull                     // the rule's table of keys in flight is full
	concShadow                   // a shadow rule would have refused: served
	concUnavailable              // store redis failed, on_store_error fail_closed: 503
	concClientGone               // the client went away during the call to Redis
)

// admit takes a place for the request in ru's max_concurrent, kept in
// slots, and writes its headers if admitted. A rule with scope cluster
// admits up to this node's cap of the key's global N. n is N at the
// request's scale.
func (ru *rule) admit(a *App, q *request, hdr http.Header, f facts, slots *inFlightSlots) (out admitOutcome, n int64) {
	c := ru.conc
	n = int64(ru.MaxConcurrent)
	if f.scale != 1 {
		n = 0 // a factor of 0 blocks
		if f.scale > 0 {
			n = limiter.ScaledCount(int64(ru.MaxConcurrent), f.scale)
		}
	}
	fallback := ru.store != nil && ru.store.leases != nil // past admitLease, the local fallback decides
	if fallback {
		if out, handled := ru.admitLease(q, f, n, slots, hdr); handled {
			return out, n
		}
		// Redis could not decide, and on_store_error local: this node
		// counts its share of the fleet's N, as rates fall back.
		if n > 0 {
			n = limiter.ScaledCount(n, ru.store.fallbackShare())
		}
	}
	capSlots := n
	var sh *gossip.Sharing
	var tracked bool
	if ru.clustered {
		if sh = a.sharing(); sh != nil {
			capSlots, tracked = sh.Slots(c.hash, f.key, uint32(min(n, math.MaxUint32)))
		}
	}
	slot, ok, inFlight := c.inFlight.AcquireScaled(f.key, capSlots)
	if !ok {
		if sh != nil {
			sh.Refused(c.hash, f.key, uint32(min(n, math.MaxUint32)))
		}
		full := inFlight < capSlots && capSlots > 0
		switch {
		case ru.Shadow:
			return concShadow, n
		case full:
			c.full.Add(1)
			return concFull, n
		}
		c.refused.Add(1)
		return concRefused, n
	}
	if sh != nil && !tracked && 2*inFlight >= capSlots {
		sh.Track(c.hash, f.key, uint32(min(n, math.MaxUint32)))
	}
	slots.add(slot)
	if fallback {
		c.holdUncapped(c.unleased, f.key, slots)
	}
	ru.setConcurrentHeaders(hdr, n, capSlots-inFlight)
	return concAdmitted, n
}

// concurrent applies ru's max_concurrent to a request its limits (if
// any) passed: its place is taken and kept in slots, or the rule refuses
// the request (refused), x saying why.
func (h *Handler) concurrent(ru *rule, w http.ResponseWriter, q *request, f facts, slots *inFlightSlots) (x refusal, refused bool) {
	out, n := ru.admit(h.app, q, w.Header(), f, slots)
	cost := f.cost // beside limits, the request passed them: one decision of both
	if ru.ConcurrentOnly() {
		cost = 1
	}
	ru.stats.decided(f.key, cost, out == concAdmitted, ru.Shadow)
	switch out {
	case concAdmitted:
		return x, false
	case concShadow:
		ru.setConcurrentHeaders(w.Header(), n, 0)
		h.logDenial(ru, q, f.key, &limiter.Decision{RetryAfter: time.Second}, true)
		return x, false
	case concClientGone:
		return clientGoneRefusal(q.r), true
	case concUnavailable:
		return refusal{why: refusedUnavailable, ru: ru, f: f}, true
	case concFull:
		return refusal{why: refusedFull, ru: ru, f: f, n: n}, true
	}
	return refusal{why: refusedConcurrent, ru: ru, f: f, n: n}, true
}

// concurrentRule is a rule's concurrency side in the cluster's sharing.
func concurrentRule(name string) (gossip.Rule, bool) {
	c := registry.concurrencyOf(name)
	if c == nil {
		return gossip.Rule{}, false
	}
	return gossip.Rule{Name: name + concurrentSuffix, Concurrent: c.inFlight.TakePeak}, true
}
