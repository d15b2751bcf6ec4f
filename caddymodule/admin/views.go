package admin

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/topkeys"
)

// The JSON answers of the admin API.

// overviewView is GET /rate_limit/.
type overviewView struct {
	Rules []ruleView `json:"rules"`
	// Snapshots is the state of the writes of the rules' snapshots to
	// Caddy's storage (persist_interval): enabled false under persist off.
	Snapshots caddymodule.SnapshotStatus `json:"snapshots"`
}

// ruleView is a rule: its configuration as loaded, the limits in force,
// and what it has decided since its name came into use (counts survive
// reloads).
type ruleView struct {
	Name      string          `json:"name"`
	Config    ruleconfig.Rule `json:"config"`
	Algorithm string          `json:"algorithm"`
	Limits    []limitView     `json:"limits"`
	Burst     int64           `json:"burst,omitempty"`
	Keys      int             `json:"keys"`
	MaxKeys   int             `json:"max_keys"`
	Evictions uint64          `json:"evictions"`
	// EvictionsLimited is how many of the evictions were of keys left at
	// one of their limits (see limiter.Limiter.EvictionCounts).
	EvictionsLimited uint64                    `json:"evictions_limited"`
	Requests         caddymodule.RequestCounts `json:"requests"`
	// InFlight is, for a rule with max_concurrent, its requests in flight
	// on this node, all keys; BusiestInFlight the keys with the most.
	InFlight        *int64            `json:"in_flight,omitempty"`
	BusiestInFlight []keyInFlightView `json:"busiest_in_flight,omitempty"`
}

// limitView is a limit in force.
type limitView struct {
	Count         int64   `json:"count"`
	Window        string  `json:"window"`
	WindowSeconds float64 `json:"window_seconds"`
}

// keyView is a key's state: per limit, as a request from it would see it
// now, at the scale its country gives (when the rule has geo_multiplier
// and the key is an address or prefix the database places).
type keyView struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	// Escaped is true if Key is shown percent-escaped (see topKey).
	Escaped bool   `json:"escaped,omitempty"`
	Country string `json:"country,omitempty"`
	network
	// Tier is the tier the limits are shown at (?tier=NAME); the rule's
	// own limits without one, as a tier is a request's, not a key's.
	Tier string `json:"tier,omitempty"`
	// Scale is the factor on the limits: the country's geo_multiplier
	// factor times the network's asn_multiplier factor times the tier's, 1
	// without any.
	Scale float64 `json:"scale"`
	// Allowed is whether a request of cost 1 would pass now.
	Allowed bool `json:"allowed"`
	// RetryAfterSeconds is, when it would not, how long until it would.
	RetryAfterSeconds float64        `json:"retry_after_seconds,omitempty"`
	Limits            []keyLimitView `json:"limits"`
	// BlockedUntil is the end of the key's block (block_for) while one
	// runs; Offences the key's blocks remembered (admin_blocks.go).
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
	Offences     int        `json:"offences,omitempty"`
	// InFlight is, for a rule with max_concurrent, the key's requests in
	// flight on this node, of MaxConcurrent.
	InFlight      *int64 `json:"in_flight,omitempty"`
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
}

// keyLimitView is a key's state under one limit.
type keyLimitView struct {
	Limit         int64   `json:"limit"`
	WindowSeconds float64 `json:"window_seconds"`
	Used          int64   `json:"used"`
	Remaining     int64   `json:"remaining"`
	ResetSeconds  float64 `json:"reset_seconds"`
}

// topKeysView is GET …/keys: the heaviest keys, by units asked for or by
// denials, with Count an upper bound and Count−Error a lower bound of a
// key's weight since it was last reset.
type topKeysView struct {
	Rule  string   `json:"rule"`
	By    string   `json:"by"`
	Total uint64   `json:"total"`
	Keys  []topKey `json:"keys"`
}

type topKey struct {
	Key string `json:"key"`
	// Escaped is true if Key is not UTF-8 text, and is shown
	// percent-escaped, as GET …/keys/{key} takes it (JSON would show
	// every such byte as U+FFFD).
	Escaped bool `json:"escaped,omitempty"`
	network
	Count     uint64 `json:"count"`
	Error     uint64 `json:"error"`
	Truncated bool   `json:"truncated,omitempty"`
}

func (v *topKeysView) addEntries(es []topkeys.Entry) {
	for _, e := range es {
		key, escaped := jsonKey(e.Key)
		t := topKey{Key: key, Escaped: escaped, Count: e.Count, Error: e.Error, Truncated: e.Truncated}
		t.network, _, _ = networkOfKey(e.Key)
		v.Keys = append(v.Keys, t)
	}
}

// jsonKey is a key as the admin API shows it: as it is if it is UTF-8
// text, else percent-escaped as a path segment, and true.
func jsonKey(key string) (string, bool) {
	if utf8.ValidString(key) {
		return key, false
	}
	return url.PathEscape(key), true
}

// resetView is DELETE …/keys/{key}.
type resetView struct {
	Rule  string `json:"rule"`
	Key   string `json:"key"`
	Reset bool   `json:"reset"` // this node had state for the key
	// Cluster is true if the reset was sent to the other nodes;
	// ClusterError names those it could not reach.
	Cluster      bool   `json:"cluster,omitempty"`
	ClusterError string `json:"cluster_error,omitempty"`
}

func overview() overviewView {
	v := overviewView{Rules: []ruleView{}, Snapshots: caddymodule.Snapshots()}
	for _, e := range caddymodule.RulesInForce() {
		v.Rules = append(v.Rules, describeRule(e))
	}
	return v
}

func describeRule(e caddymodule.RuleState) ruleView {
	cfg := e.Limiter().Config()
	v := ruleView{
		Name:      e.Name(),
		Config:    e.Config(),
		Algorithm: string(cfg.Algorithm),
		Burst:     cfg.Burst,
		Keys:      e.Limiter().Len(),
		MaxKeys:   cfg.MaxKeys,
		Requests:  e.Requests(),
	}
	v.Evictions, v.EvictionsLimited = e.Limiter().EvictionCounts()
	if v.Algorithm == "" {
		v.Algorithm = string(limiter.DefaultAlgorithm(cfg.Periods))
	}
	if v.MaxKeys == 0 {
		v.MaxKeys = limiter.DefaultMaxKeys
	}
	for i, l := range cfg.Limits {
		window := ruleconfig.WindowText(l.Window)
		if i < len(cfg.Periods) && cfg.Periods[i] != "" {
			window = string(cfg.Periods[i]) // WindowSeconds: the period's span
		}
		v.Limits = append(v.Limits, limitView{Count: l.Count, Window: window, WindowSeconds: l.Window.Seconds()})
	}
	ruleInFlight(&v, e)
	return v
}

func describeKey(e caddymodule.RuleState, key, tier string) keyView {
	cfg := e.Config()
	v := keyView{Rule: e.Name(), Tier: tier, Scale: 1}
	v.Key, v.Escaped = jsonKey(key)
	if len(cfg.GeoMultiplier) > 0 {
		code, ok := countryOfKey(key)
		v.Country = code
		factors, _ := geo.FromMap(cfg.GeoMultiplier) // checked when the rule loaded
		v.Scale = factors.For(code, ok)
	}
	var as *geo.AS
	var known bool
	v.network, as, known = networkOfKey(key)
	if len(cfg.ASNMultiplier) > 0 {
		factors, _ := geo.ASNMultipliersFromMap(cfg.ASNMultiplier) // checked when the rule loaded
		v.Scale *= factors.For(as, known)
	}
	if tier != "" {
		tiers, _ := ruleconfig.ParseTiers(cfg.Tiers, cfg.Limits) // checked when the rule loaded
		v.Scale *= tiers[tier]                                   // serveKey checked that it is one
	}
	now := time.Now()
	d := e.Limiter().PeekScaledAt(key, now, 0, v.Scale)
	next := e.Limiter().PeekScaledAt(key, now, 1, v.Scale)
	v = keyViewOf(v, &d, &next)
	keyInFlight(&v, e, key)
	return v
}

// network is the autonomous system of a key, as the admin API shows it
// beside the key: the key's own for a key by asn, else that of the first
// part of the key that is a client address or prefix (by ip, by ip/24),
// from the running config's asn_db. Empty without one.
type network struct {
	ASN    string `json:"asn,omitempty"`     // "AS15169"
	ASNOrg string `json:"asn_org,omitempty"` // "GOOGLE"
}

// networkOfKey is the network of a key, and its AS (nil if unknown).
func networkOfKey(key string) (network, *geo.AS, bool) {
	for part := range strings.SplitSeq(strings.TrimPrefix(key, "\x00"), "\x1f") {
		var as *geo.AS
		var ok bool
		if digits, isAS := strings.CutPrefix(part, "AS"); isAS {
			if n, err := strconv.ParseUint(digits, 10, 32); err == nil && n > 0 {
				as, ok = caddymodule.ASN(netip.Addr{}, uint32(n))
			}
		} else if addr, isAddr := addrOfKey(part); isAddr {
			as, ok = caddymodule.ASN(addr, 0)
		}
		if ok {
			return network{ASN: as.Key, ASNOrg: as.Org}, as, true
		}
	}
	return network{}, nil, false
}

// countryOfKey is the country the running config's geoip database gives a
// key that is a client address or prefix (by ip, by ip/24).
func countryOfKey(key string) (string, bool) {
	addr, ok := addrOfKey(strings.TrimPrefix(key, "\x00")) // on_missing_key ip
	if !ok {
		return "", false
	}
	return caddymodule.Country(addr)
}

// addrOfKey is the address of a key that is one, or the first address of
// one that is a prefix.
func addrOfKey(key string) (netip.Addr, bool) {
	if addr, err := netip.ParseAddr(key); err == nil {
		return addr, true
	}
	p, err := netip.ParsePrefix(key)
	return p.Addr(), err == nil
}
