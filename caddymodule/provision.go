package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/limiter"
)

// rule is a provisioned Rule: its limiter and what it needs per request.
type rule struct {
	Rule
	lim      *limiter.Limiter
	matchers caddyhttp.MatcherSets
	keys     []keySource
}

// Provision builds each rule and finds its counters in the rate_limit app.
func (h *Handler) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("rate_limit")
	if err != nil {
		return fmt.Errorf("loading rate_limit app: %v", err)
	}
	h.app = appIface.(*App)
	for i := range h.Rules {
		r := &rule{Rule: h.Rules[i]}
		if err := r.validate(); err != nil {
			return fmt.Errorf("rule %d (%s): %v", i, r.Name, err)
		}
		r.keys, _ = parseKeySources(r.By)
		if r.MatcherSetsRaw != nil {
			m, err := ctx.LoadModule(&h.Rules[i], "MatcherSetsRaw")
			if err != nil {
				return fmt.Errorf("rule %s: loading matchers: %v", r.Name, err)
			}
			if err := r.matchers.FromInterface(m); err != nil {
				return fmt.Errorf("rule %s: %v", r.Name, err)
			}
		}
		r.lim, err = h.app.limiterFor(r.Name, r.limiterConfig())
		if err != nil {
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		h.rules = append(h.rules, r)
	}
	return nil
}

// Validate checks that there is a rule.
func (h *Handler) Validate() error {
	if len(h.Rules) == 0 {
		return fmt.Errorf("rate_limit: no rule")
	}
	return nil
}

// Cleanup releases the rules' counters; the last config using a rule
// frees them.
func (h *Handler) Cleanup() error {
	for _, r := range h.rules {
		registry.release(r.Name)
	}
	return nil
}
