package caddymodule

// Units taken after the response (count_status, cost_header): "reserve
// before, settle after". Before the request, such a rule takes the rule's
// cost (1 unless set), a reservation (denied if it is not left; in Redis
// a denial starts the key's next block); once the response's status and
// headers are known (WriteHeader, the first Write, or the handler's
// error), the request is settled: the units it takes beyond the
// reservation are taken (Limiter.Charge, Store.ChargeScaled), past the
// limit if need be, or what it reserved beyond its units is given back
// (all of it for a status count_status does not count) to the window or
// bucket state the reservation was taken from (Limiter.Refund,
// Store.Refund): a response that ends after its window rolled gives
// nothing to the next one. Requests in
// flight each hold their reservation, so parallel requests cannot
// multiply a limit: count_status holds it exactly, and cost_header
// overshoots by at most what the requests in flight take beyond their
// reservation. The response writer is wrapped only for a
// request that some such rule allowed: other rules pay nothing.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// afterVar is the request variable holding the request's afterWriter, so
// that a later rate_limit handler adds its charges to it rather than
// wrapping again, and a later denial cancels them.
const afterVar = "rate_limit.after"

// afterCharge is one rule's units to take once the response is known.
type afterCharge struct {
	ru    *rule
	key   string
	cost  int64   // the rule's cost: count_status's units
	scale float64 // the check's scale (tiers, geo, the node's share)
	store bool    // Redis checked it: Redis takes the units
	// at is the reservation's time (Redis's, if Redis made it): a
	// give-back goes to the window or bucket state it was taken from,
	// never to a later one (limiter.Refund).
	at time.Time
}

// afterCharges are the charges of one handler's rules, on the stack.
type afterCharges = inline[afterCharge]

// charge is the charge of ru, whose check v allowed f.
func (v *verdict) charge(ru *rule, f facts) afterCharge {
	return afterCharge{ru: ru, key: f.key, cost: f.cost, scale: v.scale, store: ru.store != nil && v.from == fromStore, at: v.at}
}

// reserveFacts takes f's reservation before the request: the rule's
// cost (1 unless set), at this node's share for a rule with scope
// cluster; in Redis, where a denial starts the key's next block.
func (ru *rule) reserveFacts(a *App, q *request, f facts) (v verdict) {
	v.at = q.now
	if ru.store == nil {
		v.d, v.scale = ru.decide(a, f.key, q.now, f.cost, f.scale)
		return v
	}
	st, ctx := ru.store, q.r.Context()
	callCtx, cancel := context.WithTimeout(ctx, st.timeout)
	sd, err := st.store.Decide(callCtx, f.key, f.cost, f.scale)
	cancel()
	if err == nil {
		st.ok()
		v.d, v.block, v.from, v.scale, v.at = sd.Decision, sd.Block, fromStore, f.scale, sd.At
		kept := v.d // for the headers, if a later rule denies
		v.stored = &kept
		return v
	}
	v.d, v.from, v.scale = ru.storeFailed(ctx, err, "reserve", f.key, q.now, f.cost, f.scale)
	if v.from == fromLocal {
		v.shown = f.scale
	}
	return v
}

// serveAfter passes the request on with its charges: an earlier
// rate_limit handler's writer takes them, else a new one.
func (h *Handler) serveAfter(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, c *afterCharges) error {
	if aw, ok := caddyhttp.GetVar(r.Context(), afterVar).(*afterWriter); ok && !aw.settled {
		aw.charges = append(aw.charges, c.all()...)
		return next.ServeHTTP(w, r)
	}
	aw := &afterWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, r: r, app: h.app}
	aw.charges = append(aw.buf[:0], c.all()...)
	caddyhttp.SetVar(r.Context(), afterVar, aw)
	err := next.ServeHTTP(aw, r)
	aw.finish(err)
	return err
}

// cancelAfter drops the charges of earlier rate_limit handlers, found in
// the request's vars: a later rule denied the request, which then takes
// nothing anywhere.
func cancelAfter(vars map[string]any) {
	if aw, ok := vars[afterVar].(*afterWriter); ok {
		aw.cancelled = true
	}
}

// afterWriter takes a request's charges when its response's status is
// known, and removes the cost headers from the response.
type afterWriter struct {
	caddyhttp.ResponseWriterWrapper
	r         *http.Request
	app       *App // its clock
	charges   []afterCharge
	buf       [2]afterCharge
	settled   bool // the charges are taken
	cancelled bool // a later rule denied: take nothing
}

// String keeps the writer out of {http.vars.rate_limit.after}.
func (*afterWriter) String() string { return "" }

// WriteHeader takes the charges at the final status (informational
// statuses pass, but 101, which ends the response).
func (aw *afterWriter) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		aw.stripCostHeaders() // an Early Hints' copy must not reach the client either
		aw.ResponseWriter.WriteHeader(code)
		return
	}
	aw.settle(code)
	aw.ResponseWriter.WriteHeader(code)
}

// Write writes an implicit 200's body, taking the charges first.
func (aw *afterWriter) Write(b []byte) (int, error) {
	aw.settle(http.StatusOK)
	return aw.ResponseWriter.Write(b)
}

// ReadFrom is Write's, for io.Copy.
func (aw *afterWriter) ReadFrom(r io.Reader) (int64, error) {
	aw.settle(http.StatusOK)
	return aw.ResponseWriterWrapper.ReadFrom(r)
}

// Flush flushes an implicit 200, taking the charges first.
func (aw *afterWriter) Flush() {
	aw.settle(http.StatusOK)
	_ = http.NewResponseController(aw.ResponseWriter).Flush()
}

// Hijack takes the charges at 101, then hijacks the connection.
func (aw *afterWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	aw.settle(http.StatusSwitchingProtocols)
	return http.NewResponseController(aw.ResponseWriter).Hijack()
}

// finish takes the charges of a response the handler did not write: at
// the status of its error (a caddyhttp.HandlerError's, else 500), 499 if
// the client went away, else 200.
func (aw *afterWriter) finish(err error) {
	if aw.settled {
		return
	}
	status := http.StatusOK
	if err != nil {
		status = http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
	}
	if aw.r.Context().Err() != nil {
		status = statusClientClosed
	}
	aw.settle(status)
}

// settle takes every charge at status, once, and removes the cost
// headers (all read first: rules may share one).
func (aw *afterWriter) settle(status int) {
	if aw.settled {
		return
	}
	aw.settled = true
	hdr := aw.ResponseWriter.Header()
	now := aw.app.now()
	var units [4]int64
	for i := range aw.charges {
		n := aw.charges[i].units(status, hdr)
		if i < len(units) {
			units[i] = n
		} else if !aw.cancelled {
			aw.charges[i].take(aw.r.Context(), now, n)
		}
	}
	aw.stripCostHeaders()
	for i := range aw.charges {
		if i < len(units) && !aw.cancelled {
			aw.charges[i].take(aw.r.Context(), now, units[i])
		}
	}
}

// units is what the response takes of the charge's rule: nothing if
// count_status does not match status; else cost_header's whole number
// (absent or invalid: the rule's cost, counted), or the rule's cost.
func (c *afterCharge) units(status int, hdr http.Header) int64 {
	a := &c.ru.abuse
	if a.hasStatuses && !a.statuses.Has(status) {
		return 0
	}
	if a.costHeader == "" {
		return c.cost
	}
	if v := hdr[a.costHeader]; len(v) == 1 {
		if n, ok := costUnits(v[0]); ok {
			return n
		}
	}
	c.ru.stats.abuse.costHeaderErrors.Add(1)
	return c.cost // the reservation: the rule's cost, 1 unless set
}

// costUnits reads a cost header's value: a whole number ≥ 0. A number
// too large for an int64 saturates at math.MaxInt64, which takes all
// that the limit has: a report too large to count is a large cost, not
// an invalid one that would take the reservation alone.
func costUnits(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if errors.Is(err, strconv.ErrRange) && n == math.MaxInt64 {
		return n, true
	}
	return n, err == nil && n >= 0
}

// take settles the request at units: the units beyond its reservation
// are taken at now, or the reservation is given back if units is 0; in
// Redis if Redis reserved it (a failure applies on_store_error: local
// takes them in process at this node's share; fail_open and fail_closed
// lose them, as the response is already given), else in process.
func (c *afterCharge) take(ctx context.Context, now time.Time, units int64) {
	if units < c.cost {
		c.giveBack(ctx, now, c.cost-max(units, 0))
		return
	}
	units -= c.cost // the reservation
	if units == 0 {
		return
	}
	ru := c.ru
	if !c.store {
		ru.lim.Charge(c.key, now, units, c.scale)
		return
	}
	st := ru.store
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.timeout)
	err := st.store.ChargeScaled(callCtx, c.key, units, c.scale)
	cancel()
	if err == nil {
		st.ok()
		return
	}
	st.failed("charge", err)
	ru.stats.fallbacks[modeIndex(st.mode)].Add(1)
	if st.mode == ruleconfig.StoreErrorLocal {
		ru.lim.Charge(c.key, now, units, c.scale*st.fallbackShare())
	}
}

// giveBack gives back n units of the reservation, at now: the response
// takes fewer than were reserved. They go back to the window or bucket
// state the reservation was taken from (c.at), not to the one in force:
// a slow response ends after its window rolled (its units are then gone
// with the window), or after the bucket's refill absorbed them.
func (c *afterCharge) giveBack(ctx context.Context, now time.Time, n int64) {
	took := limiter.Taken{At: c.at, Cost: n, Scale: c.scale}
	if c.store {
		c.ru.refundStore(ctx, c.key, took)
		return
	}
	c.ru.lim.Refund(c.key, took, now)
}

// stripCostHeaders removes the charges' cost headers from the response.
func (aw *afterWriter) stripCostHeaders() {
	hdr := aw.ResponseWriter.Header()
	for i := range aw.charges {
		if h := aw.charges[i].ru.abuse.costHeader; h != "" {
			delete(hdr, h)
		}
	}
}
