package caddymodule

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// This file maps mholt/caddy-ratelimit's zones, from its JSON handler
// config (rate_limits) or its Caddyfile (zone blocks, package adapt),
// to rules.

// Zone is one of mholt/caddy-ratelimit's rate limit zones, as its JSON
// handler config gives it under rate_limits: max_events per window, by
// key. A zone becomes a rule named after it, with algorithm sliding_log.
type Zone struct {
	// MatcherSetsRaw narrows the zone to the requests that match; any set
	// matching is enough. Default: every request reaching the handler.
	MatcherSetsRaw caddyhttp.RawMatcherSets `json:"match,omitempty" caddy:"namespace=http.matchers"`

	// Key is the zone's key: text with placeholders
	// ("{http.request.remote.host}"), or static text for one counter for
	// all. A request whose key is empty is keyed by its client IP.
	// Default: "" (one counter for the whole zone).
	Key string `json:"key,omitempty"`

	// Window is the zone's window. Required, from 1ms to 366d.
	Window caddy.Duration `json:"window,omitempty"`

	// MaxEvents is how many requests a key may make per window. Required,
	// at least 1.
	MaxEvents int64 `json:"max_events,omitempty"`

	// IPv4Prefix and IPv6Prefix shorten a key that is an IP address to its
	// network, as the rule fields of the same names. Default: 0, the whole
	// address.
	IPv4Prefix int `json:"ipv4_prefix,omitempty"`
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`
}

// Rule is the zone as a rule: named after the zone, sliding_log (the
// exact window caddy-ratelimit keeps), limit max_events window, by key.
func (z *Zone) Rule(name string) (ruleconfig.Rule, error) {
	if z.MaxEvents == 0 || z.Window == 0 {
		return ruleconfig.Rule{}, fmt.Errorf("zone %s: a zone needs both events (max_events) and window", name)
	}
	if z.MaxEvents < 1 || z.MaxEvents > limiter.MaxCount {
		return ruleconfig.Rule{}, fmt.Errorf("zone %s: events %d: must be a whole number from 1 to %d", name, z.MaxEvents, int64(limiter.MaxCount))
	}
	if w := time.Duration(z.Window); w < limiter.MinWindow || w > limiter.MaxWindow {
		return ruleconfig.Rule{}, fmt.Errorf("zone %s: window %s: must be between %s and %s", name, w, limiter.MinWindow, limiter.MaxWindow)
	}
	if z.IPv4Prefix < 0 || z.IPv4Prefix > 32 || z.IPv6Prefix < 0 || z.IPv6Prefix > 128 {
		return ruleconfig.Rule{}, fmt.Errorf("zone %s: ipv4_prefix %d, ipv6_prefix %d: must be 1 to 32 and 1 to 128", name, z.IPv4Prefix, z.IPv6Prefix)
	}
	var by string
	switch {
	case z.Key == "":
		by = "static global" // caddy-ratelimit: one counter for the whole zone
	case !strings.Contains(z.Key, "{"):
		by = "static " + strings.Join(strings.Fields(z.Key), "_") // the same for every request
	default:
		by = z.Key
	}
	if _, err := parseKeySource(by); err != nil {
		return ruleconfig.Rule{}, fmt.Errorf("zone %s: key %q: %v", name, z.Key, err)
	}
	r := ruleconfig.Rule{
		Name:           name,
		MatcherSetsRaw: z.MatcherSetsRaw,
		Algorithm:      string(limiter.SlidingLog),
		Limits:         []ruleconfig.Limit{{Count: z.MaxEvents, Window: z.Window}},
		By:             []string{by},
		IPv4Prefix:     z.IPv4Prefix,
		IPv6Prefix:     z.IPv6Prefix,
	}
	if strings.Contains(by, "{") {
		// caddy-ratelimit counts requests whose key is empty together;
		// skipping them would let a client escape the zone by omitting
		// the key, so they are keyed by client IP.
		r.OnMissingKey = ruleconfig.MissingIP
	}
	return r, nil
}

// adoptZones turns the caddy-ratelimit fields of a JSON handler config
// into rules: each zone of RateLimits a rule (in name order, after Rules),
// Jitter, LogKey and DisableMetrics set on every rule that does not set
// them itself; Distributed and Storage are ignored with a warning.
func (h *Handler) adoptZones() error {
	for _, name := range slices.Sorted(maps.Keys(h.RateLimits)) {
		z := h.RateLimits[name]
		if z == nil {
			return fmt.Errorf("rate_limits: zone %s is null", name)
		}
		r, err := z.Rule(name)
		if err != nil {
			return fmt.Errorf("rate_limits: %v", err)
		}
		h.Rules = append(h.Rules, r)
	}
	if h.Jitter < 0 {
		return fmt.Errorf("jitter %v: must be ≥ 0", h.Jitter)
	}
	for i := range h.Rules {
		r := &h.Rules[i]
		r.RetryJitter = cmp.Or(r.RetryJitter, h.Jitter)
		r.LogKey = r.LogKey || h.LogKey
		r.DisableMetrics = r.DisableMetrics || h.DisableMetrics
	}
	for field, raw := range map[string]json.RawMessage{"distributed": h.Distributed, "storage": h.StorageRaw} {
		if len(raw) > 0 && string(raw) != "null" {
			h.logger.Warn("rate_limit: caddy-ratelimit's distributed rate limiting is not supported, and this field is ignored; "+
				"share limits between instances with the cluster block of the rate_limit app (global option), or store redis",
				zap.String("field", field))
		}
	}
	return nil
}
