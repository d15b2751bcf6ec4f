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

// ServeHTTP decides the request against every rule that applies. If one
// denies it, whatever this and earlier rate_limit handlers took for it is
// given back, and the request is answered 429. Otherwise it is held for
// the longest leaky-bucket delay, then passed on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	h.app.commit()
	now := time.Now()
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	var took takings // this handler's rules decided so far
	var delay time.Duration
	var where country
	var timed bool // one decision in decisionSample: time the request
	var holds heldPlaces
	defer holds.release() // on every way out; after the delay at the latest
	for _, ru := range h.rules {
		if ok, err := ru.matches(r); err != nil || !ok {
			if err != nil {
				h.undo(w.Header(), r, &took, now)
				return caddyhttp.Error(http.StatusInternalServerError, err)
			}
			continue
		}
		if ru.exempts(r) {
			ru.stats.exempt.add(clientIP(r))
			continue
		}
		key, ok := keyOf(ru.keys, r, repl)
		if !ok {
			switch ru.OnMissingKey {
			case missingIP:
				key = fallbackKey(r)
			case missingDeny:
				ru.stats.denied.add("")
				h.undo(w.Header(), r, &took, now)
				return caddyhttp.Error(http.StatusForbidden, fmt.Errorf("rate limit %s: request has no key", ru.Name))
			default:
				continue
			}
		}
		if ru.KeyHash != "" || ru.clustered && len(key) > maxSharedKeyBytes {
			key = hashedKey(key)
		}
		cost, err := ru.costOf(repl)
		if err != nil {
			h.undo(w.Header(), r, &took, now)
			return caddyhttp.Error(http.StatusBadRequest, err)
		}
		scale := ru.tierScale(r, repl)
		if ru.hasGeo {
			scale *= ru.geo.For(where.of(h.app, r, repl))
		}
		var d limiter.Decision
		var stored *limiter.Decision // the decision, when Redis made it
		var shown float64            // the scale the headers show, if not scale
		if ru.store != nil {
			var from storeOutcome
			asked := scale
			d, from, scale = ru.decideStore(r.Context(), key, now, cost, scale)
			switch {
			case from == fromLocal:
				shown = asked // the fleet's limit, decided at this node's share
			case from == fromStore:
				kept := d // escapes: only for decisions Redis made
				stored = &kept
			case from == clientGone:
				h.undo(w.Header(), r, &took, now)
				return caddyhttp.Error(statusClientClosed, r.Context().Err())
			case from == failedOpen, from == failedClosed && ru.Shadow:
				ru.stats.decided(key, cost, true, ru.Shadow)
				continue // unlimited by this rule: no headers, nothing taken
			case from == failedClosed:
				ru.stats.decided(key, cost, false, false)
				h.undo(w.Header(), r, &took, now)
				w.Header().Set("Retry-After", "1")
				if ru.ProblemJSON {
					return writeUnavailable(w, 1)
				}
				return caddyhttp.Error(http.StatusServiceUnavailable, fmt.Errorf("rate limit %s: store unavailable (on_store_error fail_closed)", ru.Name))
			}
		} else {
			d, scale = ru.decide(h.app, key, now, cost, scale)
		}
		if d.Allowed && d.Delay > 0 && !ru.Shadow && !holds.take(ru) {
			// max_held requests of the rule are held already: refused at
			// once, never queued, with what it took given back
			took.add(taken{ru: ru, key: key, cost: cost, scale: scale, shown: shown, stored: stored})
			d.Allowed, d.RetryAfter, d.Delay = false, d.Delay, 0
			for i := range d.Len {
				d.Quotas[i].Remaining = min(d.Quotas[i].Remaining+cost, d.Quotas[i].Limit)
			}
		}
		timed = ru.stats.decided(key, cost, d.Allowed, ru.Shadow) || timed
		if !d.Allowed && !ru.Shadow {
			h.undo(w.Header(), r, &took, now)
			ru.setHeaders(w.Header(), &d)
			if timed {
				observeDecision(now)
			}
			return h.deny(ru, w, r, repl, key, cost, &d, where.code)
		}
		ru.setHeaders(w.Header(), &d)
		if !d.Allowed { // shadow: served, and took nothing
			h.logDenial(ru, r, key, &d, where.code, true)
			cost = 0
		}
		took.add(taken{ru: ru, key: key, cost: cost, scale: scale, shown: shown, stored: stored})
		if !ru.Shadow { // a shadow rule never holds a request either
			delay = max(delay, d.Delay)
		}
	}
	if timed {
		observeDecision(now)
	}
	if h.app.handlers > 1 && took.n > 0 {
		// a later rate_limit handler may deny: leave the record where it
		// will look, and no longer here, so nothing is given back twice
		ledgerOf(r, now).add(took.all()...)
		took = takings{}
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			h.undo(w.Header(), r, &took, now)
			return caddyhttp.Error(statusClientClosed, r.Context().Err())
		}
		holds.release()
	}
	return next.ServeHTTP(w, r)
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
	if !ru.stats.hold(ru.maxHeld()) {
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
// node. It returns the scale the limiter used, for a refund.
func (ru *rule) decide(app *App, key string, now time.Time, cost int64, scale float64) (limiter.Decision, float64) {
	if !ru.clustered {
		return ru.lim.AllowScaledAt(key, now, cost, scale), scale
	}
	sh := app.sharing()
	if sh == nil { // the cluster node is not started yet: alone
		return ru.lim.AllowScaledAt(key, now, cost, scale), scale
	}
	limit := uint32(min(limiter.ScaledCount(ru.Limits[0].Count, scale), math.MaxUint32))
	share, tracked := sh.Share(ru.hash, key, limit)
	d := ru.lim.AllowScaledAt(key, now, cost, scale*share)
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
func (ru *rule) exempts(r *http.Request) bool {
	if len(ru.exempt) == 0 {
		return false
	}
	addr, err := netip.ParseAddr(clientIP(r))
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
func (h *Handler) deny(ru *rule, w http.ResponseWriter, r *http.Request, repl *caddy.Replacer, key string, cost int64, d *limiter.Decision, country string) error {
	wait := denialWait(d, cost)
	if ru.RetryJitter > 0 {
		wait += time.Duration(rand.Float64() * ru.RetryJitter * float64(wait))
	}
	secs := max(1, ceilSeconds(wait))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	repl.Set("http.rate_limit.rule", ru.Name)
	repl.Set("http.rate_limit.exceeded.name", ru.Name) // caddy-ratelimit's name for it
	repl.Set("http.rate_limit.key", shownKey(key))
	repl.Set("http.rate_limit.retry_after", secs)
	h.logDenial(ru, r, key, d, country, false)
	h.emitDenial(ru, r, key, secs, country)
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
