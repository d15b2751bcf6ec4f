package caddymodule

// What a rule needs of the rate_limit app (the global option): one check,
// one wording, made by the Caddyfile adapter (which gives the line of the
// subdirective) and again at Provision (for JSON configs).

import (
	"fmt"
	"strings"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// missingFor is the first thing r needs that the app's configuration
// lacks: the subdirective that needs it, and the error; "", nil if none.
// It reads the configured fields only, so the adapter can call it on the
// global option as written.
func (a *App) MissingFor(r *ruleconfig.Rule) (subdirective string, err error) {
	for _, need := range []struct {
		sub   string
		words []string
	}{{"by", r.By}, {"tier_by", []string{r.TierBy}}} {
		for _, word := range need.words {
			kind, claim, _ := strings.Cut(strings.TrimSpace(word), " ")
			switch {
			case kind == "jwt" && a.JWT == nil:
				return need.sub, fmt.Errorf("jwt %s needs the keys that verify tokens: set the global option rate_limit { jwt { … } }", strings.TrimSpace(claim))
			case kind == "asn" && claim == "" && a.ASNDB == "":
				return need.sub, errNeedsASNDB(need.sub + " asn")
			}
		}
	}
	switch {
	case len(r.GeoMultiplier) > 0 && a.GeoIP == "" && a.GeoHeader == "":
		return "geo_multiplier", fmt.Errorf("geo_multiplier needs the client's country: set the global option rate_limit { geoip <database.mmdb> } or { geo_header <name> }")
	case len(r.ASNMultiplier) > 0 && a.ASNDB == "":
		return "asn_multiplier", errNeedsASNDB("asn_multiplier")
	case r.Scope == ruleconfig.ScopeCluster && a.Cluster == nil:
		return "scope", fmt.Errorf("scope cluster needs a cluster: set the global option rate_limit { cluster { … } }")
	case r.Store == ruleconfig.StoreRedis && (a.Store == nil || a.Store.Redis == nil):
		return "store", fmt.Errorf("store redis needs a Redis: set the global option rate_limit { store redis { address <host:port> } }")
	}
	return "", nil
}

// errNeedsASNDB is the error of what needs the client's autonomous system
// without an ASN database.
func errNeedsASNDB(what string) error {
	return fmt.Errorf("%s needs the client's autonomous system: set the global option rate_limit { asn_db <GeoLite2-ASN.mmdb> }", what)
}
