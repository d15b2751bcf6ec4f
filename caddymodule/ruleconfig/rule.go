package ruleconfig

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/limiter"
)

// Rule is one rate limit: its limits, how requests are keyed, and what a
// denied client is told. Counters belong to the rule's name and survive
// config reloads while the name is unchanged.
type Rule struct {
	// Name identifies the rule's counters, in headers, logs, metrics and the
	// admin API. Rules with the same name share counters. Required in JSON;
	// the Caddyfile adapter derives one from the site, the matcher and the
	// key when none is given.
	Name string `json:"name,omitempty"`

	// Match restricts the rule to the requests these matcher sets match
	// (any set matching is enough), on top of the route's own matcher.
	// Default: every request reaching the handler.
	MatcherSetsRaw caddyhttp.RawMatcherSets `json:"match,omitempty" caddy:"namespace=http.matchers"`

	// Limits are enforced together: a request passes only if every limit
	// Has room. At least one.
	Limits []Limit `json:"limits,omitempty"`

	// Algorithm is one of sliding_window, fixed_window, sliding_log,
	// token_bucket, leaky_bucket. Default: sliding_window, or fixed_window
	// if a limit is a calendar period (the only algorithm such a rule
	// takes).
	Algorithm string `json:"algorithm,omitempty"`

	// Timezone is the IANA time zone name ("Europe/Berlin") whose calendar
	// the rule's calendar limits (Limit.Period) follow: where its days,
	// weeks, months and years begin, its clock changes included. Only for
	// a rule with a calendar limit. Default: UTC.
	Timezone string `json:"timezone,omitempty"`

	// Burst shapes the limit with the shortest window. Window algorithms: a
	// token bucket of this capacity, refilled at that limit's rate, in front
	// of the window. token_bucket: the bucket's capacity (default: the
	// limit). leaky_bucket: the queue depth (default: bounded by max_delay
	// alone). Default: 0, no burst bucket.
	Burst int64 `json:"burst,omitempty"`

	// MaxDelay is, for leaky_bucket only, the longest a request is held
	// before it is served. Default: 1s.
	MaxDelay caddy.Duration `json:"max_delay,omitempty"`

	// MaxHeld is, for leaky_bucket only, how many of the rule's requests
	// may be held at once, over all keys; past it a request that would be
	// held is refused at once (429), never queued. Default: 1000.
	MaxHeld int `json:"max_held,omitempty"`

	// By lists the key sources, joined into one composite key: "ip",
	// "ip/24", "ip/24/64" (IPv4/IPv6 prefix lengths), "user_id",
	// "header NAME", "query NAME", "cookie NAME", "static TEXT" (one
	// counter for every request), or any placeholder text. Default: ["ip"].
	By []string `json:"by,omitempty"`

	// OnMissingKey says what to do when the key is empty: "skip" (the rule
	// does not apply), "ip" (key by client IP instead) or "deny".
	// Default: skip.
	OnMissingKey string `json:"on_missing_key,omitempty"`

	// Cost is the units one request takes: a whole number from 1 to the
	// smallest limit (and burst), or a placeholder that yields one. A
	// request whose cost does not resolve to a whole number ≥ 1 is
	// answered 400. Default: 1.
	Cost string `json:"cost,omitempty"`

	// Shadow decides, logs, counts and sets headers, but never rejects.
	// Default: off.
	Shadow bool `json:"shadow,omitempty"`

	// Scope is "cluster" (the limits hold for the whole cluster, each node
	// taking a share of them) or "node" (each node applies them alone).
	// Default: cluster when the rate_limit app has a cluster, else node;
	// "cluster" without one is an error. A rule with store redis takes
	// no scope: Redis holds its limit for every node.
	Scope string `json:"scope,omitempty"`

	// Exempt lists client IP ranges (CIDR, or single addresses) the rule
	// never limits. Default: none.
	Exempt []string `json:"exempt,omitempty"`

	// Headers selects the response headers: "ietf"
	// (RateLimit-Policy/RateLimit, draft-ietf-httpapi-ratelimit-headers-11),
	// "legacy" (X-RateLimit-*), "both" or "off". Default: ietf.
	Headers string `json:"headers,omitempty"`

	// RetryJitter adds up to this fraction of the wait to Retry-After, so
	// denied clients do not all come back at once. Default: 0.
	RetryJitter float64 `json:"retry_jitter,omitempty"`

	// MaxKeys bounds the rule's live keys; past it the least recently used
	// key is evicted (and counted). Default: 1,000,000.
	MaxKeys int `json:"max_keys,omitempty"`

	// MaxOverrides bounds the rule's per-key overrides set at runtime
	// (the admin API's PUT …/keys/KEY/override); past it a new one is
	// refused (409). Default: 10,000.
	MaxOverrides int `json:"max_overrides,omitempty"`

	// ProblemJSON answers a denial with an RFC 9457 application/problem+json
	// body (type …#quota-exceeded, violated-policies) instead of leaving the
	// body to handle_errors. Default: off.
	ProblemJSON bool `json:"problem_json,omitempty"`

	// KeyHash, "sha256", replaces each key by the hex SHA-256 of it before
	// anything else sees it: the counters, the top-keys sketch, the admin
	// API, logs and events then hold the hash, never the key in clear (an
	// API key, a token's subject). Default: none.
	KeyHash string `json:"key_hash,omitempty"`

	// LogKey writes the key in the denial log line. Default: off (keys may
	// be personal data).
	LogKey bool `json:"log_key,omitempty"`

	// IPv4Prefix and IPv6Prefix shorten every part of the key that is an
	// IP address (whatever its source: by ip, a header, a placeholder) to
	// its network of that many bits, as mholt/caddy-ratelimit's zones do:
	// with 24, the key 192.0.2.7 becomes 192.0.2.0/24. From 1 to 32 and 1
	// to 128. Default: 0, the whole address.
	IPv4Prefix int `json:"ipv4_prefix,omitempty"`
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`

	// DisableMetrics leaves the rule out of the Prometheus metrics: none
	// of its per-rule series (requests_total, keys, evictions_total, held,
	// store_*) is exported. Default: off.
	DisableMetrics bool `json:"disable_metrics,omitempty"`

	// GeoMultiplier scales every limit and burst of the rule by the
	// client's country: ISO 3166-1 alpha-2 codes (either case) and
	// "default" mapped to factors ≥ 0, as in {"RU": 1.5, "US": 1,
	// "default": 0.5}. The scaled count is rounded down, but never below 1
	// unless the factor is 0, which blocks the country. Countries not
	// listed, and clients whose country is unknown (private addresses,
	// addresses missing from the database), get the default factor. The
	// country changes the limit, not the key: a client keeps its counters
	// if its country changes. Needs the app's geoip or geo_header.
	// Default: 1 for every country.
	GeoMultiplier map[string]float64 `json:"geo_multiplier,omitempty"`

	// ASNMultiplier scales every limit and burst of the rule by the
	// client's autonomous system, as GeoMultiplier does by country: AS
	// numbers ("AS15169" or "15169") and "default" mapped to factors ≥ 0,
	// as in {"AS15169": 0.5, "default": 1}. Rounding, 0 and the default
	// are as in GeoMultiplier; clients whose system is unknown get the
	// default. With GeoMultiplier too, both apply: their product. Needs
	// the app's asn_db. Default: 1 for every system.
	ASNMultiplier map[string]float64 `json:"asn_multiplier,omitempty"`

	// Tiers are alternative limits by tier name: each gives one
	// "COUNT/WINDOW" per limit of the rule, with the rule's windows and
	// one factor for all of them ({"free": ["100/1m"], "pro":
	// ["1000/1m"]}); a count of 0 blocks the tier. TierBy names the
	// request's tier. A request without a tier, or with one not listed,
	// gets the rule's limits. Default: none.
	Tiers map[string][]string `json:"tiers,omitempty"`

	// TierBy is the key source whose value is the request's tier: "jwt
	// plan", "header X-Plan", or any source of By. Required with Tiers.
	TierBy string `json:"tier_by,omitempty"`

	// Store is where the rule's state lives: "local" (in this process;
	// shared through the cluster with scope cluster) or "redis" (in the
	// Redis of the app's store block, shared exactly by every node that
	// uses it; not with scope, geo_multiplier or tiers). Default: local.
	Store string `json:"store,omitempty"`

	// OnStoreError is what a rule with store redis does when Redis cannot
	// decide within the timeout (down, refused, breaker open, an error):
	// "local" (the rule's in-process limiter decides, so each node
	// enforces the whole limit on its own), "fail_open" (the request
	// passes, unlimited by the rule and without its headers) or
	// "fail_closed" (503 Service Unavailable, Retry-After: 1).
	// Default: local.
	OnStoreError string `json:"on_store_error,omitempty"`

	// BlockFor blocks a key once the rule denies one of its requests (not
	// in shadow): for the block's duration every request of the key is
	// refused (429, Retry-After the block's rest or the limits' wait if
	// later, RateLimit r=0) without
	// taking units. Several durations escalate: the n-th block of a key
	// within BlockReset of the end of its last one lasts the n-th duration,
	// the last one repeating ("1m", "10m", "1h"). Each above 0 and at most
	// 1 year. With shadow it is accepted and blocks no one. Default: none,
	// no blocks.
	BlockFor []caddy.Duration `json:"block_for,omitempty"`

	// BlockReset is how long a key's offences (its blocks) are remembered
	// after its last block ended; after it, the key's next block is the
	// first duration again. Only with BlockFor. Default: 24h.
	BlockReset caddy.Duration `json:"block_reset,omitempty"`

	// CountStatus makes only the responses with these statuses take units:
	// codes ("401") or classes ("4xx"). Before it runs, the request
	// reserves the rule's Cost (denied if it is not left, and a block_for
	// starts); once the response's status is known the reservation stays
	// if it matches and is given back if not. Each request in flight holds
	// its reservation, so parallel requests cannot pass more than the
	// limit. A handler error counts as its status, a client gone as 499.
	// Default: none, every request takes its units before it runs.
	CountStatus []string `json:"count_status,omitempty"`

	// CostHeader names a response header (set by the upstream) whose value
	// is the units the request takes, read once the response's headers are
	// known: a whole number ≥ 0; absent or invalid, the rule's Cost (and
	// the rule's cost_header_errors counter). The header is removed from
	// the response sent to the client (and from Early Hints); a trailer of
	// that name is not read. Before it runs, the request reserves the
	// rule's Cost, an estimate (1 unless set; denied if it is not left);
	// after it, the units beyond the reservation are taken, past the limit
	// if need be, or what it reserved beyond them is given back. Requests
	// in flight overshoot the limit by at most what they take beyond their
	// reservations; a token_bucket keeps that debt until it is paid, a
	// window forgets it within two windows. With CountStatus too, only
	// responses with a matching status take the header's units. Not with
	// leaky_bucket. Default: none.
	CostHeader string `json:"cost_header,omitempty"`
	// MaxConcurrent is at most how many requests of a key may be in
	// flight at once: from admission until the response is written, the
	// client goes away, or a hijacked connection (a WebSocket) closes.
	// Over it, 429 with Retry-After: 1 (503 when the rule's table of keys
	// in flight, max_keys, is full). A rule may have it alone (no limits)
	// or beside its limits (all must pass). With scope cluster, N holds
	// for the whole cluster; with store redis, for every node sharing the
	// Redis (a lease per request). Default: 0, off.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// LeaseTimeout is, for max_concurrent with store redis, how long a
	// request's lease lives in Redis unless renewed (every third of it
	// while the request runs): a crashed node's requests stop counting
	// after it. Whole milliseconds. Default: 1m.
	LeaseTimeout caddy.Duration `json:"lease_timeout,omitempty"`
}

// Limit is one quota of a rule: Count units per Window, or per calendar
// Period. Give one of Window and Period.
type Limit struct {
	// Count is how many units a key may take per window; at least 1.
	Count int64 `json:"count"`
	// Window is the length of the window: a Caddy duration ("1m", "1d"),
	// windows aligned to the Unix epoch. Default: none (Period).
	Window caddy.Duration `json:"window,omitempty"`
	// Period is a calendar period instead of a Window: "day", "week"
	// (from Monday), "month" or "year", in the rule's Timezone. A fixed
	// window from the period's first instant to the next period's, as
	// long as the period is (a day of 23 or 25 hours when the clocks
	// change). Default: none (Window).
	Period string `json:"period,omitempty"`
}

// The values of Rule.Headers and Rule.OnMissingKey.
const (
	HeadersIETF   = "ietf"
	HeadersLegacy = "legacy"
	HeadersBoth   = "both"
	HeadersOff    = "off"

	KeyHashSHA256 = "sha256"

	ScopeCluster = "cluster"
	ScopeNode    = "node"

	MissingSkip = "skip"
	MissingIP   = "ip"
	MissingDeny = "deny"
)

// words are the values of the fields that take one of a few words, by
// field (subdirective), and how an error lists them.
var words = map[string]struct {
	ok   []string
	want string
}{
	"on_missing_key": {[]string{MissingSkip, MissingIP, MissingDeny}, "skip, ip or deny"},
	"headers":        {[]string{HeadersIETF, HeadersLegacy, HeadersBoth, HeadersOff}, "ietf, legacy, both or off"},
	"scope":          {[]string{ScopeCluster, ScopeNode}, "cluster or node"},
	"key_hash":       {[]string{KeyHashSHA256}, "sha256"},
	"store":          {[]string{StoreLocal, StoreRedis}, "local or redis"},
	"on_store_error": {[]string{StoreErrorLocal, StoreErrorFailOpen, StoreErrorFailClosed}, "local, fail_open or fail_closed"},
}

// CheckWord checks the value of a field that takes one of a few words:
// on_missing_key, headers, scope, key_hash, store or on_store_error. The
// default, "", is not one of them: a caller that allows it skips the check.
func CheckWord(field, value string) error {
	w, ok := words[field]
	if !ok {
		return fmt.Errorf("%s: not a field of words", field) // a bug of the caller
	}
	if !slices.Contains(w.ok, value) {
		return fmt.Errorf("%s %q: want %s", field, value, w.want)
	}
	return nil
}

// LimiterConfig is the rule's limits for package limiter.
func (r *Rule) LimiterConfig() limiter.Config {
	cfg := limiter.Config{
		Algorithm: limiter.Algorithm(r.Algorithm),
		Burst:     r.Burst,
		MaxDelay:  time.Duration(r.MaxDelay),
		MaxKeys:   r.MaxKeys,
	}
	for _, l := range r.Limits {
		cfg.Limits = append(cfg.Limits, limiter.Limit{Count: l.Count, Window: l.Span()})
	}
	if cfg.Periods = r.periods(); cfg.Periods != nil {
		cfg.Location, _ = r.Location() // CheckCalendar reports a bad name; the limiter's default is UTC
	}
	if r.ConcurrentOnly() {
		cfg.Limits = ConcurrentOnlyLimits // a limiter that never decides (see ConcurrentOnlyLimits)
	}
	return cfg
}

// CheckFields checks the fields that need no parsing: the name, the
// limits, and the enumerated values.
func (r *Rule) CheckFields() error {
	if r.Name == "" {
		return fmt.Errorf("rule has no name (the Caddyfile adapter derives one; JSON configs must set it)")
	}
	if strings.ContainsAny(r.Name, "\"\\") {
		return fmt.Errorf("rule name %q: must not contain '\"' or '\\'", r.Name)
	}
	if err := r.CheckCalendar(); err != nil {
		return err
	}
	if err := r.LimiterConfig().Validate(); err != nil {
		return err
	}
	if r.IPv4Prefix < 0 || r.IPv4Prefix > 32 {
		return fmt.Errorf("ipv4_prefix %d: must be 1 to 32", r.IPv4Prefix)
	}
	if r.IPv6Prefix < 0 || r.IPv6Prefix > 128 {
		return fmt.Errorf("ipv6_prefix %d: must be 1 to 128", r.IPv6Prefix)
	}
	for _, f := range []struct{ field, value string }{
		{"on_missing_key", r.OnMissingKey}, {"headers", r.Headers}, {"scope", r.Scope}, {"key_hash", r.KeyHash},
	} {
		if f.value != "" { // "": the default
			if err := CheckWord(f.field, f.value); err != nil {
				return err
			}
		}
	}
	if !(r.RetryJitter >= 0 && r.RetryJitter <= 10) { // NaN too
		return fmt.Errorf("retry_jitter %v: must be between 0 and 10", r.RetryJitter)
	}
	if err := CheckWindows(r.Limits); err != nil {
		return err
	}
	if err := r.CheckMaxHeld(); err != nil {
		return err
	}
	if r.MaxOverrides < 0 {
		return fmt.Errorf("max_overrides %d: must be a whole number of at least 1", r.MaxOverrides)
	}
	if err := r.CheckAbuse(); err != nil {
		return err
	}
	if err := r.CheckConcurrent(); err != nil {
		return err
	}
	return r.CheckStore()
}

// DefaultMaxHeld is how many requests a leaky_bucket rule holds at once
// when max_held is not given.
const DefaultMaxHeld = 1000

// EffectiveMaxHeld is max_held, or its default.
func (r *Rule) EffectiveMaxHeld() int64 {
	if r.MaxHeld == 0 {
		return DefaultMaxHeld
	}
	return int64(r.MaxHeld)
}

// CheckMaxHeld checks max_held: positive, on a leaky_bucket rule.
func (r *Rule) CheckMaxHeld() error {
	switch {
	case r.MaxHeld < 0:
		return fmt.Errorf("max_held %d: must be a whole number of at least 1", r.MaxHeld)
	case r.MaxHeld != 0 && r.Algorithm != string(limiter.LeakyBucket):
		return fmt.Errorf("max_held applies to leaky_bucket only (no other algorithm holds requests)")
	}
	return nil
}

// CheckWindows refuses two limits with one window (or one calendar
// period): both would be shown under one policy name, and the smaller
// alone is in force.
func CheckWindows(limits []Limit) error {
	for i, l := range limits {
		for _, m := range limits[:i] {
			if m.Window == l.Window && m.Period == l.Period {
				return fmt.Errorf("limit %d %s and limit %d %s have the same window: keep the smaller", m.Count, m.windowString(), l.Count, l.windowString())
			}
		}
	}
	return nil
}

// CheckCost refuses a static cost that no request could ever pay: above
// the smallest limit, or above the burst, every request would be denied
// forever. (Tiers and geo factors may scale a limit below it at request
// time; such a request is denied, with the longest window as Retry-After.)
func (r *Rule) CheckCost(cost int64) error {
	if cost < 1 {
		return fmt.Errorf("cost %d: a request must take at least 1 unit (a rule that takes nothing limits nothing)", cost)
	}
	for _, l := range r.Limits {
		if cost > l.Count {
			return fmt.Errorf("cost %d is more than limit %d %s allows: every request would be denied", cost, l.Count, l.windowString())
		}
	}
	if r.Burst > 0 && cost > r.Burst && r.Algorithm != string(limiter.LeakyBucket) {
		return fmt.Errorf("cost %d is more than burst %d allows: every request would be denied", cost, r.Burst)
	}
	return nil
}

// CheckStore checks store and on_store_error, and what store redis
// cannot be combined with.
func (r *Rule) CheckStore() error {
	if r.OnStoreError != "" {
		if err := CheckWord("on_store_error", r.OnStoreError); err != nil {
			return err
		}
	}
	switch r.Store {
	case "", StoreLocal:
		if r.OnStoreError != "" {
			return fmt.Errorf("on_store_error applies to store redis only")
		}
		return nil
	case StoreRedis:
	default:
		return CheckWord("store", r.Store)
	}
	switch {
	case r.Scope == ScopeCluster:
		return fmt.Errorf("store redis and scope cluster: choose one (Redis holds one exact limit for every node that uses it; scope cluster shares the limit by gossip)")
	case r.Scope == ScopeNode:
		return fmt.Errorf("store redis and scope node: choose one (a limit in Redis holds for every node that uses it)")
	}
	for _, l := range r.Limits {
		if time.Duration(l.Window)%time.Microsecond != 0 {
			return fmt.Errorf("limit window %s: must be a whole number of microseconds with store redis", time.Duration(l.Window))
		}
	}
	return nil
}

// ParsePrefix reads a CIDR or a single address as a prefix.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("exempt %q: %v", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("exempt %q: not an IP address or CIDR", s)
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// The values of Rule.Store and Rule.OnStoreError.
const (
	StoreLocal = "local"
	StoreRedis = "redis"

	StoreErrorLocal      = "local"
	StoreErrorFailOpen   = "fail_open"
	StoreErrorFailClosed = "fail_closed"
)

// WindowText writes a window in the largest whole unit: 1d, 12h, 1m, 30s,
// 500ms.
func WindowText(w time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if w%u.d == 0 {
			return strconv.FormatInt(int64(w/u.d), 10) + u.unit
		}
	}
	return w.String()
}
