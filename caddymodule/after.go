package caddymodule

// Units taken after the response (count_status, cost_header): "check
// before, take after". Before the request, such a rule checks that one
// unit is left (a peek in process, Store.Check in Redis) and takes
// nothing; once the response's status and headers are known (WriteHeader,
// the first Write, or the handler's error), the units are taken
// (ChargeScaledAt, Store.ChargeScaled), past the limit if need be. The
// response writer is wrapped only for a request that some such rule
// allowed: other rules pay nothing.

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
}

// afterCharges are the charges of one handler's rules, on the stack.
type afterCharges struct {
	buf  [2]afterCharge
	n    int
	more []afterCharge
}

// add records the charge of ru, whose check v allowed f.
func (c *afterCharges) add(ru *rule, f facts, v *verdict) {
	x := afterCharge{ru: ru, key: f.key, cost: f.cost, scale: v.scale, store: ru.store != nil && v.from == fromStore}
	if c.n < len(c.buf) {
		c.buf[c.n] = x
	} else {
		c.more = append(c.more, x)
	}
	c.n++
}

func (c *afterCharges) all() []afterCharge {
	if c.n <= len(c.buf) {
		return c.buf[:c.n]
	}
	return append(c.buf[:], c.more...)
}

// checkFacts checks f before the request: one unit must be left. Nothing
// is taken; with store redis a denial starts the key's next block there.
func (ru *rule) checkFacts(a *App, q *request, f facts) (v verdict) {
	if ru.store == nil {
		v.d, v.scale = ru.peek(a, f.key, q.now, f.scale)
		return v
	}
	st, ctx := ru.store, q.r.Context()
	callCtx, cancel := context.WithTimeout(ctx, st.timeout)
	sd, err := st.store.Check(callCtx, f.key, f.scale)
	cancel()
	if err == nil {
		st.ok()
		v.d, v.block, v.from, v.scale = sd.Decision, sd.Block, fromStore, f.scale
		kept := v.d // for the headers, if a later rule denies
		v.stored = &kept
		return v
	}
	v.d, v.from, v.scale = ru.storeFailed(ctx, err, "check", f.key, q.now, 1, f.scale)
	if v.from == fromLocal {
		v.shown = f.scale
	}
	return v
}

// peek is decide's check of one unit, taking nothing: with scope cluster,
// at this node's share of the key's limit.
func (ru *rule) peek(app *App, key string, now time.Time, scale float64) (limiter.Decision, float64) {
	sh := app.sharing()
	if !ru.clustered || sh == nil {
		return ru.lim.PeekScaledAt(key, now, 1, scale), scale
	}
	limit := uint32(min(limiter.ScaledCount(ru.Limits[0].Count, scale), math.MaxUint32))
	share, tracked := sh.Share(ru.hash, key, limit)
	d := ru.lim.PeekScaledAt(key, now, 1, scale*share)
	if q := d.Quotas[0]; !tracked && 2*q.Remaining <= q.Limit {
		sh.Track(ru.hash, key, limit)
	}
	for i := 0; i < d.Len && scale > 0; i++ {
		d.Quotas[i].Limit = limiter.ScaledCount(ru.Limits[i].Count, scale)
	}
	return d, scale * share
}

// serveAfter passes the request on with its charges: an earlier
// rate_limit handler's writer takes them, else a new one.
func (h *Handler) serveAfter(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, c *afterCharges) error {
	if aw, ok := caddyhttp.GetVar(r.Context(), afterVar).(*afterWriter); ok && !aw.settled {
		aw.charges = append(aw.charges, c.all()...)
		return next.ServeHTTP(w, r)
	}
	aw := &afterWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, r: r}
	aw.charges = append(aw.buf[:0], c.all()...)
	caddyhttp.SetVar(r.Context(), afterVar, aw)
	err := next.ServeHTTP(aw, r)
	aw.finish(err)
	return err
}

// cancelAfter drops the charges of earlier rate_limit handlers: a later
// rule denied the request, which then takes nothing anywhere.
func cancelAfter(r *http.Request) {
	if aw, ok := caddyhttp.GetVar(r.Context(), afterVar).(*afterWriter); ok {
		aw.cancelled = true
	}
}

// afterWriter takes a request's charges when its response's status is
// known, and removes the cost headers from the response.
type afterWriter struct {
	caddyhttp.ResponseWriterWrapper
	r         *http.Request
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
	now := time.Now()
	var units [4]int64
	for i := range aw.charges {
		n := aw.charges[i].units(status, hdr)
		if i < len(units) {
			units[i] = n
		} else if !aw.cancelled {
			aw.charges[i].take(aw.r.Context(), now, n)
		}
	}
	for i := range aw.charges {
		if h := aw.charges[i].ru.abuse.costHeader; h != "" {
			delete(hdr, h)
		}
		if i < len(units) && !aw.cancelled {
			aw.charges[i].take(aw.r.Context(), now, units[i])
		}
	}
}

// units is what the response takes of the charge's rule: nothing if
// count_status does not match status; else cost_header's whole number
// (absent or invalid: 1, counted), or the rule's cost.
func (c *afterCharge) units(status int, hdr http.Header) int64 {
	a := &c.ru.abuse
	if a.hasStatuses && !a.statuses.has(status) {
		return 0
	}
	if a.costHeader == "" {
		return c.cost
	}
	if v := hdr[a.costHeader]; len(v) == 1 {
		if n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	c.ru.stats.abuse.costHeaderErrors.Add(1)
	return 1
}

// take takes units at now: in Redis if Redis checked the request (a
// failure applies on_store_error: local takes them in process at this
// node's share; fail_open and fail_closed lose them, as the response is
// already given), else in process.
func (c *afterCharge) take(ctx context.Context, now time.Time, units int64) {
	if units <= 0 {
		return
	}
	ru := c.ru
	if !c.store {
		ru.lim.ChargeScaledAt(c.key, now, units, c.scale)
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
	if st.mode == storeErrorLocal {
		ru.lim.ChargeScaledAt(c.key, now, units, c.scale*st.fallbackShare())
	}
}
