package caddymodule

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// rule is a provisioned Rule: its limiter and what it needs per request.
type rule struct {
	Rule
	lim      *limiter.Limiter
	stats    *ruleStats
	matchers caddyhttp.MatcherSets
	keys     []keySource
	exempt   []netip.Prefix
	cost     int64  // when costText is ""
	costText string // a placeholder giving the cost
	ietf     bool   // headers: ietf or both
	legacy   bool   // headers: legacy or both
	policies []string
	policy   string // RateLimit-Policy at scale 1
	geo      geo.Multipliers
	hasGeo   bool // geo_multiplier is set

	store      *ruleStore         // store redis: its state in Redis
	hash       uint64             // gossip.KeyHash(Name), for a rule with scope cluster
	tiers      map[string]float64 // the factor of each tier; nil without tiers
	tierSource keySource
}

// newRule provisions what a Rule needs per request (but its limiter and
// matchers, which need the context).
func newRule(cfg Rule) (*rule, error) {
	r := &rule{Rule: cfg, cost: 1}
	if err := cfg.checkFields(); err != nil {
		return nil, err
	}
	var err error
	if r.keys, err = parseKeySources(r.By); err != nil {
		return nil, err
	}
	withPrefixes(r.keys, r.IPv4Prefix, r.IPv6Prefix)
	for _, e := range r.Exempt {
		p, err := parsePrefix(e)
		if err != nil {
			return nil, err
		}
		r.exempt = append(r.exempt, p)
	}
	switch {
	case r.Cost == "":
	case strings.Contains(r.Cost, "{"):
		r.costText = r.Cost
	default:
		if r.cost, err = strconv.ParseInt(r.Cost, 10, 64); err != nil {
			return nil, fmt.Errorf("cost %q: want a whole number ≥ 1 or a placeholder", r.Cost)
		}
		if err := r.checkCost(r.cost); err != nil {
			return nil, err
		}
	}
	if r.geo, err = geo.FromMap(r.GeoMultiplier); err != nil {
		return nil, fmt.Errorf("geo_multiplier: %v", err)
	}
	r.hasGeo = len(r.GeoMultiplier) > 0
	if r.tiers, err = parseTiers(r.Tiers, r.Limits); err != nil {
		return nil, err
	}
	switch {
	case r.tiers != nil && r.TierBy == "":
		return nil, fmt.Errorf("tiers need tier_by: where the request's tier comes from (jwt plan, header X-Plan)")
	case r.tiers == nil && r.TierBy != "":
		return nil, fmt.Errorf("tier_by without tiers")
	case r.tiers != nil:
		if r.tierSource, err = parseKeySource(r.TierBy); err != nil {
			return nil, fmt.Errorf("tier_by: %v", err)
		}
	}
	r.ietf = r.Headers == "" || r.Headers == headersIETF || r.Headers == headersBoth
	r.legacy = r.Headers == headersLegacy || r.Headers == headersBoth
	r.policies = policyNames(r.Name, r.Limits)
	r.policy = policyHeader(r.policies, r.Limits)
	return r, nil
}

// Provision builds each rule and finds its counters in the rate_limit app.
func (h *Handler) Provision(ctx caddy.Context) error {
	appIface, err := ctx.App("rate_limit")
	if err != nil {
		return fmt.Errorf("loading rate_limit app: %v", err)
	}
	h.app = appIface.(*App)
	h.app.handlers++
	h.logger = ctx.Logger()
	h.denials = h.logger.WithOptions(zap.WrapCore(sampleDenials))
	h.ctx = ctx
	events, err := ctx.App("events")
	if err != nil {
		return fmt.Errorf("loading events app: %v", err)
	}
	h.events = events.(*caddyevents.App)
	if h.RulesFile != "" {
		path := caddy.NewReplacer().ReplaceKnown(h.RulesFile, "")
		// the file's name keeps its rules' derived names apart from those
		// of inline rules on the same paths
		prefix := strings.TrimSpace(h.RulesFileNames + " " + filepath.Base(path))
		if h.RulesFileNames == "" {
			prefix = path
		}
		rules, err := loadRulesFile(path, prefix)
		if err != nil {
			return err
		}
		h.Rules = append(h.Rules, rules...)
	}
	if err := h.adoptZones(); err != nil {
		return err
	}
	names := make(map[string]bool, len(h.Rules))
	for _, r := range h.Rules {
		if names[r.Name] && r.Name != "" {
			return fmt.Errorf("rule %q is defined twice in this handler", r.Name)
		}
		names[r.Name] = true
	}
	for i := range h.Rules {
		r, err := newRule(h.Rules[i])
		if err != nil {
			return fmt.Errorf("rule %d (%s): %v", i, h.Rules[i].Name, err)
		}
		if r.MatcherSetsRaw != nil {
			m, err := ctx.LoadModule(&h.Rules[i], "MatcherSetsRaw")
			if err != nil {
				return fmt.Errorf("rule %s: loading matchers: %v", r.Name, err)
			}
			if err := r.matchers.FromInterface(m); err != nil {
				return fmt.Errorf("rule %s: %v", r.Name, err)
			}
		}
		if _, err := h.app.missingFor(&r.Rule); err != nil {
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		for _, src := range append(ptrs(r.keys), &r.tierSource) {
			if src.kind == sourceJWT {
				src.tokens = h.app.tokens
			}
		}
		if h.app.Cluster != nil && r.Scope != scopeNode && r.Store != storeRedis {
			r.clustered = true
			r.hash = gossip.KeyHash(r.Name)
		}
		// the in-process limiter: the rule's state, or with store redis
		// the fallback of on_store_error local
		r.lim, r.stats, err = h.app.limiterFor(r.Rule)
		if err != nil {
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		if r.Store == storeRedis {
			if r.store, err = h.app.storeFor(r); err != nil {
				registry.release(r.Name)
				return fmt.Errorf("rule %s: %v", r.Name, err)
			}
		}
		if slices.Contains(r.By, "user_id") {
			h.logger.Warn("rule keys by user_id: {http.auth.user.id} is set by authentication handlers, which run after rate_limit in the default order; put basic_auth/forward_auth before rate_limit in a route block, or requests will have no key",
				zap.String("rule", r.Name))
		}
		h.warnBypass(r)
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

// ptrs points at each element of s.
func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// clientSources are the key sources whose value the client sends, and so
// may leave out or choose.
var clientSources = map[sourceKind]string{sourceJWT: "token", sourceHeader: "header", sourceQuery: "query parameter", sourceCookie: "cookie"}

// warnBypass warns about a rule that clients can slip past: keyed by
// something they send, with on_missing_key skip (leave it out and the rule
// does not apply), or with a tier they name themselves.
func (h *Handler) warnBypass(r *rule) {
	if r.OnMissingKey == "" || r.OnMissingKey == missingSkip {
		for _, src := range r.keys {
			if what, ok := clientSources[src.kind]; ok {
				h.logger.Warn("rule keys by a "+what+" with on_missing_key skip: a request without one (or, for a token, with one that fails verification) is not limited by this rule; set on_missing_key ip to limit such requests by client IP",
					zap.String("rule", r.Name), zap.String("source", strings.Join(r.By, " ")))
				break
			}
		}
	}
	if r.tiers != nil && r.tierSource.kind != sourceJWT && r.tierSource.kind != sourceUserID {
		h.logger.Warn("tier_by reads a value the client can send: unless a proxy in front of Caddy sets or removes it, clients choose their own tier; prefer tier_by jwt CLAIM",
			zap.String("rule", r.Name), zap.String("tier_by", r.TierBy))
	}
}
