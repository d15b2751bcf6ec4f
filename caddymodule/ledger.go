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

// taken is one rule's part in a request: the key it decided on, the
// units it took (0 for a shadow rule that would have denied), and the
// scale of its limits (the country's geo_multiplier factor).
type taken struct {
	ru    *rule
	key   string
	cost  int64
	scale float64
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

// takings is what one handler's rules decided for a request, kept on the
// stack.
type takings struct {
	buf  [8]taken
	n    int
	more []taken // past len(buf)
}

func (t *takings) add(x taken) {
	if t.n < len(t.buf) {
		t.buf[t.n] = x
	} else {
		t.more = append(t.more, x)
	}
	t.n++
}

func (t *takings) all() []taken {
	if t.n <= len(t.buf) {
		return t.buf[:t.n]
	}
	return append(t.buf[:], t.more...)
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
	if len(earlier) == 0 && took.n == 0 {
		return // the common denial: the first rule to decide denied
	}
	mine := took.all()
	defer func() { *took = takings{} }()
	for _, k := range []string{hdrRateLimit, hdrRateLimitPolicy, hdrLimit, hdrRemaining, hdrReset} {
		delete(hdr, k)
	}
	for _, ts := range [][]taken{earlier, mine} {
		for _, t := range ts {
			if t.stored != nil {
				if t.cost > 0 {
					t.ru.refundStore(r.Context(), t.key, t.cost, t.scale)
				}
				d := *t.stored // as it was, with the units back
				for i := 0; i < d.Len; i++ {
					d.Quotas[i].Remaining = min(d.Quotas[i].Remaining+t.cost, d.Quotas[i].Limit)
				}
				t.ru.setHeaders(hdr, &d)
				continue
			}
			if t.cost > 0 {
				t.ru.lim.RefundAt(t.key, now, t.cost, t.scale)
			}
			d := t.ru.lim.PeekScaledAt(t.key, now, 0, t.scale)
			for i := 0; i < d.Len && t.shown > 0; i++ {
				d.Quotas[i].Limit = limiter.ScaledCount(t.ru.Limits[i].Count, t.shown)
			}
			t.ru.setHeaders(hdr, &d)
		}
	}
}
