package caddymodule

// The refusal of a request, in one place. A rule's step (serve.go) that
// cannot let the request through says why in a refusal; the rule loop has
// one exit for it, Handler.refuse, which gives back what the request took
// (here and in earlier rate_limit handlers: undo), and answers: the
// headers, Retry-After, the placeholders, the denial's log line and Caddy
// event, and the response itself (problem+json, the bare status, or an
// error for handle_errors).

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/edgebyte/edgelimit/limiter"
)

// refusalKind is why a rule refuses a request.
type refusalKind uint8

const (
	refusedLimits      refusalKind = iota // 429: a limit had no room (quota-exceeded)
	refusedBlocked                        // 429: the key is blocked (abnormal-usage-detected)
	refusedConcurrent                     // 429: the key has max_concurrent's N in flight
	refusedFull                           // 503: the rule's table of keys in flight is full
	refusedUnavailable                    // 503: the store is down, on_store_error fail_closed
	refusedRequest                        // the request's own error: err (no key 403, bad cost 400, a matcher's 500, client gone 499)
)

// refusal is a rule's refusal of a request, as its step found it.
type refusal struct {
	why  refusalKind
	ru   *rule
	f    facts
	wait time.Duration // refusedBlocked: the block's rest
	n    int64         // refusedConcurrent, refusedFull: N at the request's scale
	err  error         // refusedRequest: the handler's return
}

// refuse answers a request that x refuses, v being the refusing rule's
// verdict for refusedLimits: everything the request took or holds is given
// back first (all-or-nothing), then the refusal is written.
func (h *Handler) refuse(w http.ResponseWriter, q *request, took *takings, slots *inFlightSlots, v *verdict, x refusal) error {
	slots.release() // this handler's places, at once; an earlier handler's when it returns
	h.undo(w.Header(), q.r, took, q.now)
	ru, hdr := x.ru, w.Header()
	switch x.why {
	case refusedRequest:
		return x.err
	case refusedUnavailable:
		hdr.Set("Retry-After", "1")
		return respond(w, q.r, ru, refusedUnavailable, nil, 1)
	case refusedLimits:
		if !h.offend(ru, q, x.f, v) { // else a block in force in Redis (blocks.go)
			return h.deny(w, q, x.f, ru, &v.d)
		}
		x.wait = v.d.RetryAfter
	case refusedConcurrent, refusedFull:
		ru.setConcurrentHeaders(hdr, x.n, 0)
		hdr.Set("Retry-After", "1")
		h.shown(q, new(shownRefusal), ru, x.f.key, 1)
		h.logDenial(ru, q, x.f.key, &limiter.Decision{RetryAfter: time.Second}, false)
		h.emitDenial(ru, q, x.f.key, 1)
		return respond(w, q.r, ru, x.why, []string{ru.conc.name}, 1)
	}
	return h.refuseBlocked(w, q, x.f, ru, x.wait)
}

// deny answers a request a limit had no room for: the headers of d,
// Retry-After (the wait, with the rule's jitter), the placeholders, a log
// line and the event, and a 429.
func (h *Handler) deny(w http.ResponseWriter, q *request, f facts, ru *rule, d *limiter.Decision) error {
	wait := denialWait(d, f.cost)
	if ru.RetryJitter > 0 {
		wait += time.Duration(rand.Float64() * ru.RetryJitter * float64(wait))
	}
	secs := max(1, ceilSeconds(wait))
	hv := ru.writeHeaders(w.Header(), d, secs) // Retry-After too, and room for the placeholders
	h.shown(q, &hv.shown, ru, f.key, secs)
	h.logDenial(ru, q, f.key, d, false)
	h.emitDenial(ru, q, f.key, secs)
	var violated []string
	if ru.ProblemJSON {
		violated = ru.violated(d, f.cost)
	}
	return respond(w, q.r, ru, refusedLimits, violated, secs)
}

// refuseBlocked answers a request of a blocked key, rest before the block
// ends: 429, Retry-After the rest, RateLimit r=0, no units taken and no
// decision made; with problem_json the type is abnormal-usage-detected.
func (h *Handler) refuseBlocked(w http.ResponseWriter, q *request, f facts, ru *rule, rest time.Duration) error {
	secs := max(1, ceilSeconds(rest))
	var d limiter.Decision
	d.Len = len(ru.Limits)
	for i, l := range ru.Limits {
		d.Quotas[i] = limiter.Quota{Limit: limiter.ScaledCount(l.Count, f.scale), Window: l.Span(), Reset: rest, Effective: rest}
	}
	hv := ru.writeHeaders(w.Header(), &d, secs)
	h.shown(q, &hv.shown, ru, f.key, secs)
	return respond(w, q.r, ru, refusedBlocked, ru.policies, secs)
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

// status is the HTTP status of a refusal.
func (why refusalKind) status() int {
	if why == refusedFull || why == refusedUnavailable {
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// respond writes the refusal's response: problem+json with problem_json
// (policies being the policies it names), else an error for handle_errors
// when the server has such routes, else the bare status.
//
// Caddy's server logs a handler's error of status 500 and above at error
// level, once a request, when it has no error routes: written here, a 503
// refusal is not (the plugin warns of its store once a probe_interval),
// and a refusal spares the error path's own cost (a stack trace, a logger,
// the error placeholders: about a sixth of a denial's CPU). With error
// routes, Caddy logs the error at debug level.
func respond(w http.ResponseWriter, r *http.Request, ru *rule, why refusalKind, policies []string, secs int64) error {
	if ru.ProblemJSON {
		return writeProblem(w, problemOf(why, policies, secs))
	}
	if !hasErrorRoutes(r) {
		w.WriteHeader(why.status())
		return nil
	}
	return caddyhttp.Error(why.status(), errRefused{rule: ru.Name, why: why, secs: secs, max: ru.MaxConcurrent})
}

// errRefused is the error of a refused request, for handle_errors:
// {http.error.message} says which rule and how long to wait.
type errRefused struct {
	rule string
	why  refusalKind
	secs int64
	max  int // the rule's max_concurrent
}

func (e errRefused) Error() string {
	secs := strconv.FormatInt(e.secs, 10)
	switch e.why {
	case refusedUnavailable:
		return "rate limit " + e.rule + ": store unavailable (on_store_error fail_closed)"
	case refusedBlocked:
		return "rate limit " + e.rule + ": key blocked; retry in " + secs + "s"
	case refusedConcurrent, refusedFull:
		return "rate limit " + e.rule + ": max_concurrent " + strconv.Itoa(e.max) + " in flight; retry in " + secs + "s"
	}
	return "rate limit " + e.rule + " exceeded; retry in " + secs + "s"
}

// hasErrorRoutes reports whether the server handling r has handle_errors
// routes, which render a refusal returned as an error. A request from
// outside a Caddy server (a test) counts as having them.
func hasErrorRoutes(r *http.Request) bool {
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return true
	}
	return srv.Errors != nil && len(srv.Errors.Routes) > 0
}

// The problem types of draft-ietf-httpapi-ratelimit-headers: a quota
// exceeded (429), a key blocked (429), and a server that cannot decide
// for now (503: the rule's store is down under on_store_error fail_closed,
// or its table of keys in flight is full).
const (
	quotaExceeded            = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	abnormalUsage            = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	temporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problem is an RFC 9457 problem details body for a refused request.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// problemOf is the problem of a refusal, naming policies.
func problemOf(why refusalKind, policies []string, retryAfter int64) problem {
	secs := strconv.FormatInt(retryAfter, 10)
	p := problem{
		Type:             quotaExceeded,
		Title:            "Request cannot be satisfied as assigned quota has been exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           "Retry in " + secs + " seconds.",
		ViolatedPolicies: policies,
	}
	switch why {
	case refusedBlocked:
		p.Type, p.Title = abnormalUsage, "Request not satisfied due to detected abnormal usage"
		p.Detail = "Blocked; retry in " + secs + " seconds."
	case refusedFull, refusedUnavailable:
		p.Type, p.Title = temporaryReducedCapacity, "Request cannot be satisfied due to temporary reduced capacity"
		p.Status, p.ViolatedPolicies = http.StatusServiceUnavailable, nil
	}
	return p
}

// writeProblem writes p as application/problem+json, with p's status.
func writeProblem(w http.ResponseWriter, p problem) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, err = w.Write(body)
	return err
}

// refusalVar is the request variable holding the request's refusal, so
// that a second refusal of the request (a rate_limit handler in
// handle_errors) replaces what the placeholders show.
const refusalVar = "rate_limit.refusal"

// A shownRefusal is what the placeholders of a refused request show:
// {http.rate_limit.rule} and caddy-ratelimit's
// {http.rate_limit.exceeded.name} (the rule's name), {http.rate_limit.key}
// (as shownKey shows it) and {http.rate_limit.retry_after} (seconds).
type shownRefusal struct {
	rule, key     string
	retryAfterSec int64
}

// shown makes the request's placeholders show ru's refusal of key, secs
// being its Retry-After, keeping it in *at (the refusal's headerValues,
// so that it costs no allocation of its own) unless an earlier refusal
// of the request keeps it already.
func (h *Handler) shown(q *request, at *shownRefusal, ru *rule, key string, secs int64) {
	*at = shownRefusal{rule: ru.Name, key: shownKey(key), retryAfterSec: secs}
	showRefusal(q.r, q.repl, at)
}

// setRefusal makes the request's placeholders show v.
func setRefusal(r *http.Request, repl *caddy.Replacer, v shownRefusal) {
	showRefusal(r, repl, &v)
}

// showRefusal makes the request's placeholders show *p. They are one
// replacer provider, resolved when something reads them (a handle_errors
// route, a log, an outer handler such as intercept): four entries in the
// replacer's map would cost a denial the map itself, and a boxed value
// each, for placeholders most configs never read. A second refusal of
// the request (a rate_limit handler in handle_errors) is copied into the
// first's, which its provider reads.
func showRefusal(r *http.Request, repl *caddy.Replacer, p *shownRefusal) {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if old, ok := vars[refusalVar].(*shownRefusal); ok {
		*old = *p
		return
	}
	if vars != nil {
		vars[refusalVar] = p
	}
	repl.Map(p.placeholder)
}

// placeholder is the value of the placeholder name, if it is one of v's.
func (v *shownRefusal) placeholder(name string) (any, bool) {
	switch name {
	case "http.rate_limit.rule", "http.rate_limit.exceeded.name":
		return v.rule, true
	case "http.rate_limit.key":
		return v.key, true
	case "http.rate_limit.retry_after":
		return v.retryAfterSec, true
	}
	return nil, false
}

// String keeps the key out of {http.vars.rate_limit.refusal}.
func (*shownRefusal) String() string { return "" }

// Denial log sampling: per handler and second, the first denialsFirst
// lines are written, then one in denialsThereafter.
const (
	denialsFirst      = 20
	denialsThereafter = 1000
)

// sampleDenials wraps the denial logger's core in zap's sampler.
func sampleDenials(core zapcore.Core) zapcore.Core {
	return zapcore.NewSamplerWithOptions(core, time.Second, denialsFirst, denialsThereafter)
}

// exceededEvent is the Caddy event emitted on a denial, for event handlers
// (the events app) to react to, as mholt/caddy-ratelimit emits it.
const exceededEvent = "rate_limit_exceeded"

// logDenial logs a denial at info (sampled); the key only with log_key,
// the client's country only for a rule with geo_multiplier, its
// autonomous system only for a rule that uses it (asnShown). A denial that
// is served (shadow) logs and emits nothing else.
func (h *Handler) logDenial(ru *rule, q *request, key string, d *limiter.Decision, shadow bool) {
	if !h.denials.Core().Enabled(zap.InfoLevel) { // no entry, no clock read, at level WARN and above
		return
	}
	msg := "rate limit exceeded"
	if shadow {
		msg = "rate limit exceeded (shadow: served)"
	}
	ce := h.denials.Check(zap.InfoLevel, msg)
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("rule", ru.Name),
		zap.String("client_ip", q.clientIP()),
		zap.Duration("wait", d.RetryAfter),
	}
	if ru.LogKey {
		fields = append(fields, zap.String("key", shownKey(key)))
	}
	if ru.hasGeo {
		fields = append(fields, zap.String("country", q.where.code))
	}
	if ru.usesASN {
		fields = append(fields, zap.String("asn", asnShown(q)))
	}
	ce.Write(fields...)
}

// emitDenial emits the rate_limit_exceeded event, if anything listens:
// the rule, the client IP, the wait in whole seconds, the key only with
// log_key, the country for a rule with geo_multiplier, and the autonomous
// system for a rule that uses it.
func (h *Handler) emitDenial(ru *rule, q *request, key string, retryAfter int64) {
	if h.events == nil || !h.events.ShouldEmit(exceededEvent) {
		return
	}
	data := map[string]any{
		"rule":        ru.Name,
		"client_ip":   q.clientIP(),
		"retry_after": retryAfter,
	}
	if ru.LogKey {
		data["key"] = shownKey(key)
	}
	if ru.hasGeo {
		data["country"] = q.where.code
	}
	if ru.usesASN {
		data["asn"] = asnShown(q)
	}
	h.events.Emit(h.ctx, exceededEvent, data)
}

// undo gives back what the request took, in this handler (took) and in
// earlier rate_limit handlers (the request's ledger), and rewrites the
// rate-limit headers those rules set, so they show the units given back.
func (h *Handler) undo(hdr http.Header, r *http.Request, took *takings, now time.Time) {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	var earlier []taken
	if l, ok := vars[ledgerVar].(*ledger); ok {
		earlier, now = l.taken, l.now
		l.taken = nil
	}
	cancelAfter(vars) // an earlier handler's units after the response: the request does not run
	if len(earlier) == 0 && took.len() == 0 {
		return // the common denial: the first rule to decide denied
	}
	mine := took.all()
	defer took.reset()
	for _, k := range []string{hdrRateLimit, hdrRateLimitPolicy, hdrLimit, hdrRemaining, hdrReset} {
		delete(hdr, k)
	}
	for _, ts := range [][]taken{earlier, mine} {
		for _, t := range ts {
			if t.stored != nil {
				if t.took.Cost > 0 {
					t.ru.refundStore(r.Context(), t.key, t.took)
				}
				d := *t.stored // as it was, with the units back
				for i := 0; i < d.Len; i++ {
					d.Quotas[i].Remaining = min(d.Quotas[i].Remaining+t.took.Cost, d.Quotas[i].Limit)
				}
				t.ru.setHeaders(hdr, &d)
				continue
			}
			if t.took.Cost > 0 {
				t.ru.lim.Refund(t.key, t.took, now)
			}
			d := t.ru.lim.PeekScaledAt(t.key, now, 0, t.took.Scale)
			for i := 0; i < d.Len && t.shown > 0; i++ {
				d.Quotas[i].Limit = limiter.ScaledCount(t.ru.Limits[i].Count, t.shown)
			}
			t.ru.setHeaders(hdr, &d)
		}
	}
}
