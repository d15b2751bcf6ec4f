package caddymodule

import (
	"math"
	"net/http"
	"time"

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
// one step a rule (step: its facts, from request.go; a block in force; its
// decision, in process, in the cluster's share or in Redis; what the
// request takes of it). If a rule refuses, whatever this and earlier
// rate_limit handlers took for the request is given back, and the request
// is answered (refuse.go). Otherwise it is held for the longest
// leaky-bucket delay, then passed on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var holds heldPlaces    // the leaky-bucket places held: given up after the delay at the latest
	var slots inFlightSlots // max_concurrent's places: given up when the chain returns (concurrency.go)
	defer func() {          // on every way out; one defer, a function of one return, is open-coded
		slots.release()
		holds.release()
	}()
	return h.serve(w, r, next, &holds, &slots)
}

// passage is what a request took on its way through one handler's rules.
type passage struct {
	took  takings       // the rules' units, to give back if a later rule refuses
	after afterCharges  // units to take once the response is known (after.go)
	delay time.Duration // the longest leaky-bucket delay
	timed bool          // one decision in decisionSample: time the request
}

// serve is ServeHTTP, the places it holds released by its caller.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, holds *heldPlaces, slots *inFlightSlots) error {
	h.app.commit()
	q := readRequest(r, h.app.now())
	var p passage
	var v verdict // the deciding rule's verdict; a denial's is read by refuse
	for _, ru := range h.rules {
		if x, refused := h.step(ru, w, &q, &v, &p, holds, slots); refused {
			if p.timed {
				observeDecision(q.now)
			}
			return h.refuse(w, &q, &p.took, slots, &v, x)
		}
	}
	if p.timed {
		observeDecision(q.now)
	}
	if h.app.handlers > 1 && p.took.len() > 0 {
		// a later rate_limit handler may deny: leave the record where it
		// will look, and no longer here, so nothing is given back twice
		ledgerOf(r, q.now).add(p.took.all()...)
		p.took.reset()
	}
	if p.delay > 0 && h.app.virtual == nil { // a replay decides the delay, and does not wait
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return h.refuse(w, &q, &p.took, slots, &v, clientGoneRefusal(r))
		}
		holds.release()
	}
	if p.after.len() > 0 {
		return h.serveAfter(w, r, next, &p.after)
	}
	return next.ServeHTTP(w, r)
}

// step is one rule's part in a request: its facts, a block in force, its
// decision (in v), and what the request takes of it (in p) or holds (a
// leaky bucket's place, max_concurrent's). refused is true when the rule
// refuses the request, x saying why.
func (h *Handler) step(ru *rule, w http.ResponseWriter, q *request, v *verdict, p *passage, holds *heldPlaces, slots *inFlightSlots) (x refusal, refused bool) {
	f, use, err := ru.factsOf(h.app, q)
	if err != nil {
		return refusal{why: refusedRequest, ru: ru, err: err}, true
	}
	if !use {
		return x, false
	}
	if until, blocked := ru.blockedAt(f.key, q.now); blocked { // blocks.go
		ru.stats.decided(f.key, f.cost, false, false)
		return refusal{why: refusedBlocked, ru: ru, f: f, wait: ru.blockedWait(h.app, f, q.now, until)}, true
	}
	if ru.conc != nil && ru.ConcurrentOnly() {
		return h.concurrent(ru, w, q, f, slots)
	}
	*v = ru.decideFacts(h.app, q, f)
	switch v.from {
	case clientGone:
		return clientGoneRefusal(q.r), true
	case failedOpen:
		ru.stats.decided(f.key, f.cost, true, ru.Shadow)
		return x, false // unlimited by this rule: no headers, nothing taken
	case failedClosed:
		ru.stats.decided(f.key, f.cost, ru.Shadow, ru.Shadow)
		return refusal{why: refusedUnavailable, ru: ru, f: f}, !ru.Shadow
	}
	d := &v.d
	if d.Allowed && d.Delay > 0 && !ru.Shadow && !holds.take(ru) {
		// max_held requests of the rule are held already: refused at
		// once, never queued, with what it took given back
		p.took.add(v.taken(ru, f.key, f.cost))
		d.Allowed, d.RetryAfter, d.Delay = false, d.Delay, 0
		for i := range d.Len {
			d.Quotas[i].Remaining = min(d.Quotas[i].Remaining+f.cost, d.Quotas[i].Limit)
		}
	}
	if ru.conc == nil || !d.Allowed {
		// else counted once its place is decided (concurrent)
		p.timed = ru.stats.decided(f.key, f.cost, d.Allowed, ru.Shadow) || p.timed
	}
	if !d.Allowed && !ru.Shadow {
		return refusal{why: refusedLimits, ru: ru, f: f}, true
	}
	if h.app.virtual == nil { // a replay's response is not sent (virtual.go)
		ru.setHeaders(w.Header(), d)
	}
	cost := f.cost
	if !d.Allowed { // shadow: served, and took nothing
		h.logDenial(ru, q, f.key, d, true)
		cost = 0
	} else if ru.abuse.after { // its cost reserved: settled after the response
		p.after.add(v.charge(ru, f)) // cost stays: given back if a later rule denies
	}
	p.took.add(v.taken(ru, f.key, cost))
	if !ru.Shadow { // a shadow rule never holds a request either
		p.delay = max(p.delay, d.Delay)
	}
	if ru.conc != nil {
		return h.concurrent(ru, w, q, f, slots)
	}
	return x, false
}

// clientGoneRefusal is the refusal of a request whose client went away
// while it waited (a leaky bucket's delay, a call to Redis): 499.
func clientGoneRefusal(r *http.Request) refusal {
	return refusal{why: refusedRequest, err: caddyhttp.Error(statusClientClosed, r.Context().Err())}
}

// verdict is a rule's decision on a request, with what giving its units
// back needs.
type verdict struct {
	d      limiter.Decision
	from   storeOutcome      // store redis: where the decision came from
	scale  float64           // the scale the decision used, for a refund
	at     time.Time         // the decision's time (Redis's, if Redis made it), for a refund
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
		v.at = q.now
		return v
	}
	var sd redisstore.Decision
	sd, v.from, v.scale = ru.decideStore(q.r.Context(), f.key, q.now, f.cost, f.scale)
	v.d, v.block, v.at = sd.Decision, sd.Block, sd.At
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
	return taken{ru: ru, key: key, took: limiter.Taken{At: v.at, Cost: cost, Scale: v.scale}, shown: v.shown, stored: v.stored}
}

// heldPlaces are the places a request takes in its rules' max_held while
// a leaky bucket holds it.
type heldPlaces struct{ inline[*rule] }

// take takes a place in ru's max_held, and reports whether there was one.
func (p *heldPlaces) take(ru *rule) bool {
	if !ru.stats.hold(ru.EffectiveMaxHeld()) {
		return false
	}
	p.add(ru)
	return true
}

// release gives every place back; a second call does nothing.
func (p *heldPlaces) release() {
	p.each(func(ru **rule) { (*ru).stats.held.Add(-1) })
	p.reset()
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
	if sh == nil || !(scale > 0) { // not started yet: alone; a scale of 0 (a tier or override refusing the key): no share asked
		return ru.lim.AllowScaledAt(key, now, cost, scale), scale
	}
	limit := uint32(min(limiter.ScaledCount(ru.Limits[0].Count, scale), math.MaxUint32))
	share, tracked := sh.ShareAt(ru.hash, key, limit, now)
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
