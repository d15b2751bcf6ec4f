package caddymodule

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
	"github.com/edgebyte/edgelimit/gossip"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler applies rate-limit rules to requests: a request that a rule
// denies gets a 429 (an error that handle_errors can render), with
// Retry-After; others pass to the next handler, with the rules' headers.
//
// Rules within one handler, and across several rate_limit handlers on one
// request, are all-or-nothing: a request denied by one rule takes nothing
// from the others.
type Handler struct {
	// Rules are the rate limits applied to every request reaching the
	// handler (each narrowed by its own match). At least one.
	Rules []ruleconfig.Rule `json:"rules,omitempty"`

	// RulesFile is the path of a file of rules in the EdgeByte YAML format
	// (a rate_limit: list of rules, each with path:, limit:, window:, by:
	// and any other subdirective as a field). It is read when the config
	// loads, on every load: its rules are added to Rules. A missing file,
	// bad YAML, an unknown field or a bad value fails the load with the
	// file and line. Global placeholders such as {env.RULES} are replaced.
	// Default: none.
	RulesFile string `json:"rules_file,omitempty"`

	// RulesFileNames prefixes the names derived for the rules of RulesFile
	// that have no name: "<prefix> <file name> <path> by <key>". The
	// Caddyfile adapter sets the site's addresses, so that two sites
	// reading one file keep separate counters. Default: none, and the
	// file's whole path stands for the file name.
	RulesFileNames string `json:"rules_file_names,omitempty"`

	// SweepInterval is accepted for compatibility with
	// mholt/caddy-ratelimit; idle keys are swept by the rate_limit app.
	SweepInterval caddy.Duration `json:"sweep_interval,omitempty"`

	// The fields below are mholt/caddy-ratelimit's, so that its JSON
	// handler configs load unchanged (see docs/caddy-ratelimit.md).

	// RateLimits are caddy-ratelimit's zones by name; each becomes a rule
	// of that name (algorithm sliding_log), after Rules, in name order.
	// Default: none.
	RateLimits map[string]*Zone `json:"rate_limits,omitempty"`

	// Jitter is the retry_jitter of every rule that sets none: up to this
	// fraction of the wait is added to Retry-After. Default: 0.
	Jitter float64 `json:"jitter,omitempty"`

	// LogKey sets log_key on every rule: keys are written in denial log
	// lines. Default: off.
	LogKey bool `json:"log_key,omitempty"`

	// DisableMetrics sets disable_metrics on every rule: none of their
	// series is exported. Default: off.
	DisableMetrics bool `json:"disable_metrics,omitempty"`

	// Distributed is caddy-ratelimit's distributed rate limiting through
	// storage: accepted and ignored, with a warning (use the rate_limit
	// app's cluster block, or store redis). Default: none.
	Distributed json.RawMessage `json:"distributed,omitempty"`

	// StorageRaw is the storage of Distributed: accepted and ignored, with
	// a warning. Default: none.
	StorageRaw json.RawMessage `json:"storage,omitempty"`

	rules   []*rule // provisioned
	app     *App
	logger  *zap.Logger
	denials *zap.Logger // logger, sampled: a flood of denials cannot flood the log
	ctx     caddy.Context
	events  *caddyevents.App
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.rate_limit",
		New: func() caddy.Module { return new(Handler) },
	}
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
		rules, err := rulesyntax.LoadRulesFile(path, prefix, ruleChecks)
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
		if _, err := h.app.MissingFor(&r.Rule); err != nil {
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		r.attachSources(h.app)
		if h.app.Cluster != nil && r.Scope != ruleconfig.ScopeNode && r.Store != ruleconfig.StoreRedis {
			r.clustered = true
			r.hash = gossip.KeyHash(r.Name)
		}
		// the in-process limiter: the rule's state, or with store redis
		// the fallback of on_store_error local
		r.lim, r.stats, err = h.app.limiterFor(r.Rule, r.clustered)
		if err != nil {
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		r.overrides = registry.overridesFor(r.Rule)
		if r.abuse.blocks, err = registry.blocksFor(r.Rule, r.clustered); err != nil {
			registry.release(r.Name)
			return fmt.Errorf("rule %s: %v", r.Name, err)
		}
		r.provisionConcurrency()
		if r.Store == ruleconfig.StoreRedis {
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

// attachSources gives the rule's key and tier sources what they read of
// the app: its token verifier (jwt), its ASN database (asn).
func (r *rule) attachSources(a *App) {
	for _, src := range append(ptrs(r.keys), &r.tierSource) {
		switch src.kind {
		case sourceJWT:
			src.tokens = a.tokens
		case sourceASN:
			src.asns = a.asn
		}
	}
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
	if r.OnMissingKey == "" || r.OnMissingKey == ruleconfig.MissingSkip {
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

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
