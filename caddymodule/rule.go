package caddymodule

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/limiter"
)

// rule is a provisioned Rule: its limiter and what it needs per request.
type rule struct {
	ruleconfig.Rule
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
	calendar bool   // a limit is a calendar period: RateLimit-Policy shows the period in force
	geo      geo.Multipliers
	hasGeo   bool // geo_multiplier is set
	asn      geo.ASNMultipliers
	hasASN   bool // asn_multiplier is set
	usesASN  bool // asn_multiplier, or a key or tier by asn: logs and events show the ASN

	clustered  bool               // scope cluster, with a cluster
	store      *ruleStore         // store redis: its state in Redis
	hash       uint64             // gossip.KeyHash(Name), for a rule with scope cluster
	tiers      map[string]float64 // the factor of each tier; nil without tiers
	tierSource keySource

	abuse abuse            // block_for, count_status, cost_header (blocks.go, after.go)
	conc  *ruleConcurrency // max_concurrent; nil without (concurrency.go)

	overrides *limiter.Overrides // per-key factors set at runtime (overrides.go); set at Provision
}

// newRule provisions what a Rule needs per request (but its limiter and
// matchers, which need the context).
func newRule(cfg ruleconfig.Rule) (*rule, error) {
	r := &rule{Rule: cfg, cost: 1, overrides: limiter.NewOverrides(cfg.MaxOverrides)} // Provision gives the registry's
	if err := cfg.CheckFields(); err != nil {
		return nil, err
	}
	var err error
	if r.keys, err = parseKeySources(r.By); err != nil {
		return nil, err
	}
	withPrefixes(r.keys, r.IPv4Prefix, r.IPv6Prefix)
	for _, e := range r.Exempt {
		p, err := ruleconfig.ParsePrefix(e)
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
		if err := r.CheckCost(r.cost); err != nil {
			return nil, err
		}
	}
	if r.geo, err = geo.FromMap(r.GeoMultiplier); err != nil {
		return nil, fmt.Errorf("geo_multiplier: %v", err)
	}
	r.hasGeo = len(r.GeoMultiplier) > 0
	if r.asn, err = geo.ASNMultipliersFromMap(r.ASNMultiplier); err != nil {
		return nil, fmt.Errorf("asn_multiplier: %v", err)
	}
	r.hasASN = len(r.ASNMultiplier) > 0
	if r.tiers, err = ruleconfig.ParseTiers(r.Tiers, r.Limits); err != nil {
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
	r.usesASN = r.hasASN || r.tierSource.kind == sourceASN && r.tiers != nil ||
		slices.ContainsFunc(r.keys, func(k keySource) bool { return k.kind == sourceASN })
	r.ietf = r.Headers == "" || r.Headers == ruleconfig.HeadersIETF || r.Headers == ruleconfig.HeadersBoth
	r.legacy = r.Headers == ruleconfig.HeadersLegacy || r.Headers == ruleconfig.HeadersBoth
	if r.abuse, err = newAbuse(&cfg); err != nil {
		return nil, err
	}
	r.policies = policyNames(r.Name, r.Limits)
	r.policy = policyHeader(r.policies, r.Limits)
	r.calendar = r.HasCalendar()
	return r, nil
}

// ruleChecks are the checks that the rule syntax (package rulesyntax)
// leaves to this package: a `by` word's key source, and the whole rule as
// newRule provisions it.
var ruleChecks = rulesyntax.Checks{
	KeySource: func(word string) error { _, err := parseKeySource(word); return err },
	Rule:      validateRule,
}

// RuleChecks are the checks of a rule that the rule syntax leaves to this
// package, for the Caddyfile adapter (package caddymodule/adapt).
func RuleChecks() rulesyntax.Checks { return ruleChecks }

// parseRulesFile reads a rules file's text (rulesyntax.ParseRulesFile)
// with this package's checks.
func parseRulesFile(data []byte, file, namePrefix string) ([]ruleconfig.Rule, error) {
	return rulesyntax.ParseRulesFile(data, file, namePrefix, ruleChecks)
}

// validateRule checks a rule, in words fit for a config error: everything
// newRule would refuse.
func validateRule(r ruleconfig.Rule) error {
	_, err := newRule(r)
	return err
}
