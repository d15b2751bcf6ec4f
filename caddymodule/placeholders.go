package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// refusalVar is the request variable holding the request's refusal, so
// that a second refusal of the request (a rate_limit handler in
// handle_errors) replaces what the placeholders show.
const refusalVar = "rate_limit.refusal"

// A refusal is what the placeholders of a refused request show:
// {http.rate_limit.rule} and caddy-ratelimit's
// {http.rate_limit.exceeded.name} (the rule's name), {http.rate_limit.key}
// (as shownKey shows it) and {http.rate_limit.retry_after} (seconds).
type refusal struct {
	rule, key     string
	retryAfterSec int64
}

// setRefusal makes the request's placeholders show v. They are one
// replacer provider, resolved when something reads them (a handle_errors
// route, a log): four entries in the replacer's map would cost a denial
// the map itself, and a boxed value each, for placeholders most configs
// never read.
func setRefusal(r *http.Request, repl *caddy.Replacer, v refusal) {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if old, ok := vars[refusalVar].(*refusal); ok {
		*old = v
		return
	}
	p := &v
	if vars != nil {
		vars[refusalVar] = p
	}
	repl.Map(p.placeholder)
}

// placeholder is the value of the placeholder name, if it is one of v's.
func (v *refusal) placeholder(name string) (any, bool) {
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
func (*refusal) String() string { return "" }
