package caddymodule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
)

// maxSharedKeyBytes bounds the keys of a rule with scope cluster: a longer
// one is replaced by its SHA-256 (hex), the same on every node. A node
// keeps the keys it follows in the cluster (up to max_keys of them) and
// resets travel with the key: a client must not make either hold
// megabytes a key.
const maxSharedKeyBytes = 1024

// statusClientClosed is the status logged when the client leaves while
// its request is held by a leaky bucket (nginx's 499).
const statusClientClosed = 499

// ServeHTTP decides the request against every rule that applies, in
// three steps a rule: its facts (request.go: key, cost, scale), its
// decision (in process, in the cluster's share, or in Redis), then the
// answer. If a rule denies, whatever this and earlier rate_limit handlers
// took for the request is given back, and the request is answered 429.
// Otherwise it is held for the longest leaky-bucket delay, then passed on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var holds heldPlaces    // the leaky-bucket places held: given up after the delay at the latest
	var slots inFlightSlots // max_concurrent's places: given up when the chain returns (concurrency.go)
	defer func() {          // on every way out; one defer, a function of one return, is open-coded
		slots.release()
		holds.release()
	}()
	return h.serve(w, r, next, &holds, &slots)
}

// serve is ServeHTTP, the places it holds released by its caller.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, holds *heldPlaces, slots *inFlightSlots) error {
	h.app.commit()
	q := readRequest(r, time.Now())
	var took takings // this handler's rules decided so far
	var delay time.Duration
	var timed bool         // one decision in decisionSample: time the request
	var after afterCharges // units to take once the response is known (after.go)
	for _, ru := range h.rules {
		f, use, err := ru.factsOf(h.app, &q)
		if err != nil {
			h.undo(w.Header(), r, &took, q.now)
			return err
		}
		if !use {
			continue
		}
		if until, blocked := ru.blockedAt(f.key, q.now); blocked { // blocks.go
			h.undo(w.Header(), r, &took, q.now)
			return h.refuseBlocked(ru, w, &q, f, ru.blockedWait(h.app, f, q.now, until))
		}
		if ru.conc != nil && ru.ConcurrentOnly() {
			if stop, err := h.serveConcurrent(ru, w, &q, f, &took, slots); stop {
				return err
			}
			continue
		}
		v := ru.decideFacts(h.app, &q, f)
		switch v.from {
		case clientGone:
			h.undo(w.Header(), r, &took, q.now)
			return caddyhttp.Error(statusClientClosed, r.Context().Err())
		case failedOpen:
			ru.stats.decided(f.key, f.cost, true, ru.Shadow)
			continue // unlimited by this rule: no headers, nothing taken
		case failedClosed:
			ru.stats.decided(f.key, f.cost, ru.Shadow, ru.Shadow)
			if ru.Shadow {
				continue
			}
			h.undo(w.Header(), r, &took, q.now)
			return ru.unavailable(w)
		}
		d := &v.d
		if d.Allowed && d.Delay > 0 && !ru.Shadow && !holds.take(ru) {
			// max_held requests of the rule are held already: refused at
			// once, never queued, with what it took given back
			took.add(v.taken(ru, f.key, f.cost))
			d.Allowed, d.RetryAfter, d.Delay = false, d.Delay, 0
			for i := range d.Len {
				d.Quotas[i].Remaining = min(d.Quotas[i].Remaining+f.cost, d.Quotas[i].Limit)
			}
		}
		if ru.conc == nil || !d.Allowed {
			// else counted once its place is decided (serveConcurrent)
			timed = ru.stats.decided(f.key, f.cost, d.Allowed, ru.Shadow) || timed
		}
		if !d.Allowed && !ru.Shadow {
			h.undo(w.Header(), r, &took, q.now)
			if h.offend(ru, &q, f, &v) { // a block in force in Redis
				return h.refuseBlocked(ru, w, &q, f, d.RetryAfter)
			}
			ru.setHeaders(w.Header(), d)
			if timed {
				observeDecision(q.now)
			}
			return h.deny(ru, w, &q, f, d)
		}
		ru.setHeaders(w.Header(), d)
		cost := f.cost
		if !d.Allowed { // shadow: served, and took nothing
			h.logDenial(ru, &q, f.key, d, true)
			cost = 0
		} else if ru.abuse.after { // its cost reserved: settled after the response
			after.add(ru, f, &v) // cost stays: given back if a later rule denies
		}
		took.add(v.taken(ru, f.key, cost))
		if !ru.Shadow { // a shadow rule never holds a request either
			delay = max(delay, d.Delay)
		}
		if ru.conc != nil {
			if stop, err := h.serveConcurrent(ru, w, &q, f, &took, slots); stop {
				return err
			}
		}
	}
	if timed {
		observeDecision(q.now)
	}
	if h.app.handlers > 1 && took.n > 0 {
		// a later rate_limit handler may deny: leave the record where it
		// will look, and no longer here, so nothing is given back twice
		ledgerOf(r, q.now).add(took.all()...)
		took = takings{}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			h.undo(w.Header(), r, &took, q.now)
			return caddyhttp.Error(statusClientClosed, r.Context().Err())
		}
		holds.release()
	}
	if after.n > 0 {
		return h.serveAfter(w, r, next, &after)
	}
	return next.ServeHTTP(w, r)
}

// verdict is a rule's decision on a request, with what giving its units
// back needs.
type verdict struct {
	d      limiter.Decision
	from   storeOutcome      // store redis: where the decision came from
	scale  float64           // the scale the decision used, for a refund
	shown  float64           // the scale the headers show, if not scale
	stored *limiter.Decision // the decision, when Redis made it
	block  redisstore.Block  // store redis with block_for: the key's block
}

// decideFacts decides f: in Redis for a rule with store redis, else in
// process (at this node's share for a rule with scope cluster).
func (ru *rule) decideFacts(a *App, q *request, f facts) (v verdict) {
	if ru.abuse.after {
		return ru.reserveFacts(a, q, f) // after.go
	}
	if ru.store == nil {
		v.d, v.scale = ru.decide(a, f.key, q.now, f.cost, f.scale)
		return v
	}
	v.d, v.from, v.scale, v.block = ru.decideStore(q.r.Context(), f.key, q.now, f.cost, f.scale)
	switch v.from {
	case fromLocal:
		v.shown = f.scale // the fleet's limit, decided at this node's share
	case fromStore:
		kept := v.d // escapes: only for decisions Redis made
		v.stored = &kept
	}
	return v
}

// taken is what v took of key, cost units, to give back if a later rule
// denies.
func (v *verdict) taken(ru *rule, key string, cost int64) taken {
	return taken{ru: ru, key: key, cost: cost, scale: v.scale, shown: v.shown, stored: v.stored}
}

// unavailable answers a request that a rule with on_store_error
// fail_closed cannot decide: 503, Retry-After 1.
func (ru *rule) unavailable(w http.ResponseWriter) error {
	w.Header().Set("Retry-After", "1")
	if ru.ProblemJSON {
		return writeUnavailable(w, 1)
	}
	return caddyhttp.Error(http.StatusServiceUnavailable, fmt.Errorf("rate limit %s: store unavailable (on_store_error fail_closed)", ru.Name))
}

// heldPlaces are the places a request takes in its rules' max_held while
// a leaky bucket holds it.
type heldPlaces struct {
	rules [2]*rule
	n     int
	more  []*rule // past len(rules)
}

// take takes a place in ru's max_held, and reports whether there was one.
func (p *heldPlaces) take(ru *rule) bool {
	if !ru.stats.hold(ru.EffectiveMaxHeld()) {
		return false
	}
	if p.n < len(p.rules) {
		p.rules[p.n] = ru
	} else {
		p.more = append(p.more, ru)
	}
	p.n++
	return true
}

// release gives every place back; a second call does nothing.
func (p *heldPlaces) release() {
	for i := range min(p.n, len(p.rules)) {
		p.rules[i].stats.held.Add(-1)
	}
	for _, ru := range p.more {
		ru.stats.held.Add(-1)
	}
	*p = heldPlaces{}
}

// decide decides a request at scale. A rule with scope cluster takes this
// node's share of the key's limit, on top of the scale; the decision then
// shows the key's global limits (at scale) and what remains of it on this
// node. It returns the scale the limiter used, for a refund. A rule that
// shows no RateLimit headers has no use for an allowed request's quotas:
// the limiter leaves them out where that saves work (a denial has them).
func (ru *rule) decide(app *App, key string, now time.Time, cost int64, scale float64) (d limiter.Decision, _ float64) {
	if !ru.clustered {
		ru.lim.AllowInto(&d, key, now, cost, scale, ru.ietf || ru.legacy)
		return d, scale
	}
	sh := app.sharing()
	if sh == nil { // the cluster node is not started yet: alone
		return ru.lim.AllowScaledAt(key, now, cost, scale), scale
	}
	limit := uint32(min(limiter.ScaledCount(ru.Limits[0].Count, scale), math.MaxUint32))
	share, tracked := sh.Share(ru.hash, key, limit)
	d = ru.lim.AllowScaledAt(key, now, cost, scale*share)
	if q := d.Quotas[0]; !tracked && 2*q.Remaining <= q.Limit {
		sh.Track(ru.hash, key, limit) // near its share here: follow it
	}
	for i := 0; i < d.Len; i++ {
		if scale > 0 {
			d.Quotas[i].Limit = limiter.ScaledCount(ru.Limits[i].Count, scale)
		}
	}
	return d, scale * share
}

// matches is true if the rule's matchers match the request.
func (ru *rule) matches(r *http.Request) (bool, error) {
	if len(ru.matchers) == 0 {
		return true, nil
	}
	return ru.matchers.AnyMatchWithError(r)
}

// exempts is true if the client is in one of the rule's exempt ranges.
func (ru *rule) exempts(q *request) bool {
	if len(ru.exempt) == 0 {
		return false
	}
	addr, err := netip.ParseAddr(q.clientIP())
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range ru.exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// costOf is the units the request takes.
func (ru *rule) costOf(repl *caddy.Replacer) (int64, error) {
	if ru.costText == "" {
		return ru.cost, nil
	}
	v := repl.ReplaceKnown(ru.costText, "")
	if v == "" {
		return 1, nil // the placeholder is empty: the default cost
	}
	// At least 1: a cost of 0 takes nothing and always passes, so a cost
	// a client can influence must not be able to reach it.
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("rate limit %s: cost %q is not a whole number ≥ 1", ru.Name, v)
	}
	return n, nil
}

// deny answers a denied request: Retry-After, the placeholders, a log
// line, and a 429: an error for handle_errors when the server has such
// routes, a problem+json body with problem_json, else the bare status.
func (h *Handler) deny(ru *rule, w http.ResponseWriter, q *request, f facts, d *limiter.Decision) error {
	r, repl, key, cost := q.r, q.repl, f.key, f.cost
	wait := denialWait(d, cost)
	if ru.RetryJitter > 0 {
		wait += time.Duration(rand.Float64() * ru.RetryJitter * float64(wait))
	}
	secs := max(1, ceilSeconds(wait))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	setRefusal(r, repl, refusal{rule: ru.Name, key: shownKey(key), retryAfterSec: secs})
	h.logDenial(ru, q, key, d, false)
	h.emitDenial(ru, q, key, secs)
	if ru.ProblemJSON {
		return writeProblem(w, ru.violated(d, cost), secs)
	}
	if !hasErrorRoutes(r) {
		// What Caddy's server writes for a handler's error when no
		// handle_errors route is set: the status, no body. Writing it here
		// spares the error path (a stack trace for the error, a logger
		// built to log it at debug level, the error placeholders), which
		// cost about a sixth of a denied request's CPU.
		w.WriteHeader(http.StatusTooManyRequests)
		return nil
	}
	return caddyhttp.Error(http.StatusTooManyRequests, fmt.Errorf("rate limit %s exceeded; retry in %ds", ru.Name, secs))
}

// hasErrorRoutes reports whether the server handling r has handle_errors
// routes, which render a denial returned as an error. A request from
// outside a Caddy server (a test) counts as having them.
func hasErrorRoutes(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return true
	}
	return srv.Errors != nil && len(srv.Errors.Routes) > 0
}

// violated names the policies that had no room for the request.
func (ru *rule) violated(d *limiter.Decision, cost int64) []string {
	var names []string
	for i := 0; i < d.Len; i++ {
		if d.Quotas[i].Remaining < cost || d.Quotas[i].Limit == 0 {
			names = append(names, ru.policies[i])
		}
	}
	if len(names) == 0 { // denied by the burst bucket alone
		names = ru.policies
	}
	return names
}
