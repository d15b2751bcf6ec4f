package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/limiter"
)

// ledgerVar is the request variable holding the request's ledger.
const ledgerVar = "rate_limit.ledger"

// ledger records what rate_limit handlers took for one request, so that a
// later denial (by another rule or another rate_limit handler) can give it
// all back: limits are all-or-nothing across rules.
type ledger struct {
	now   time.Time
	taken []taken
	buf   [4]taken
}

// taken is one rule's part in a request: the key it decided on, and
// what its decision took (took: the decision's time, Redis's if Redis
// made it, so that the units go back where they were taken; the units, 0
// for a shadow rule that would have denied; the scale of its limits, the
// country's geo_multiplier factor).
type taken struct {
	ru   *rule
	key  string
	took limiter.Taken
	// shown, if not 0, is the scale of the limits the headers show: the
	// request's, where a rule with store redis decided locally at this
	// node's share of it (scale).
	shown float64
	// stored is the decision Redis made, for a rule with store redis
	// that Redis decided: the units are given back there. Nil when the
	// in-process limiter decided.
	stored *limiter.Decision
}

// ledgerOf is the request's ledger, made on first use.
func ledgerOf(r *http.Request, now time.Time) *ledger {
	if l, ok := caddyhttp.GetVar(r.Context(), ledgerVar).(*ledger); ok {
		return l
	}
	l := &ledger{now: now}
	l.taken = l.buf[:0]
	caddyhttp.SetVar(r.Context(), ledgerVar, l)
	return l
}

// String keeps the keys out of {http.vars.rate_limit.ledger}.
func (*ledger) String() string { return "" }

func (l *ledger) add(ts ...taken) {
	l.taken = append(l.taken, ts...)
}

// takings is what one handler's rules took for a request, kept on the
// stack.
type takings = inline[taken]
