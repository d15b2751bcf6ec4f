package caddymodule

// The rules of a rate_limit block: one rule's subdirectives, what a rule
// block inherits from the top of the block, and the argument readers.

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/limiter"
)

// parseRuleBlock reads `rule NAME { … }`.
func parseRuleBlock(d *caddyfile.Dispenser) (*ruleSpec, error) {
	spec := newRuleSpec(d.Token())
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	spec.rule.Name = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "name":
			return nil, d.Errf("name in a rule block: the rule is named by `rule %s`", spec.rule.Name)
		case "rule", "zone", "jitter", "sweep_interval", "distributed", "storage":
			return nil, d.Errf("%s cannot be inside a rule block", d.Val())
		}
		if err := spec.parseSubdirective(d); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// ruleSpec is a rule as one block gives it, with the subdirectives it
// sets, so that defaults fill in only the others.
type ruleSpec struct {
	rule  ruleconfig.Rule
	start caddyfile.Token            // where the rule begins, for errors about all of it
	set   map[string]caddyfile.Token // subdirectives given, at their first line
}

func newRuleSpec(start caddyfile.Token) *ruleSpec {
	return &ruleSpec{start: start, set: make(map[string]caddyfile.Token)}
}

// at is where subdirective was given, else the rule's first line.
func (s *ruleSpec) at(subdirective string) caddyfile.Token {
	if tok, ok := s.set[subdirective]; ok {
		return tok
	}
	return s.start
}

func (s *ruleSpec) has(subdirective string) bool {
	_, ok := s.set[subdirective]
	return ok
}

// repeatableSubdirectives add to their list; the others may appear once.
var repeatableSubdirectives = map[string]bool{"limit": true, "by": true, "exempt": true, "match": true, "tier": true}

// inheritedFields copies each field a rule may inherit from the defaults, by
// subdirective. name is not inherited.
var inheritedFields = map[string]func(dst, src *ruleconfig.Rule){
	"limit":           func(dst, src *ruleconfig.Rule) { dst.Limits = slices.Clone(src.Limits) },
	"algorithm":       func(dst, src *ruleconfig.Rule) { dst.Algorithm = src.Algorithm },
	"burst":           func(dst, src *ruleconfig.Rule) { dst.Burst = src.Burst },
	"max_delay":       func(dst, src *ruleconfig.Rule) { dst.MaxDelay = src.MaxDelay },
	"max_held":        func(dst, src *ruleconfig.Rule) { dst.MaxHeld = src.MaxHeld },
	"by":              func(dst, src *ruleconfig.Rule) { dst.By = slices.Clone(src.By) },
	"on_missing_key":  func(dst, src *ruleconfig.Rule) { dst.OnMissingKey = src.OnMissingKey },
	"cost":            func(dst, src *ruleconfig.Rule) { dst.Cost = src.Cost },
	"shadow":          func(dst, src *ruleconfig.Rule) { dst.Shadow = src.Shadow },
	"scope":           func(dst, src *ruleconfig.Rule) { dst.Scope = src.Scope },
	"exempt":          func(dst, src *ruleconfig.Rule) { dst.Exempt = slices.Clone(src.Exempt) },
	"headers":         func(dst, src *ruleconfig.Rule) { dst.Headers = src.Headers },
	"retry_jitter":    func(dst, src *ruleconfig.Rule) { dst.RetryJitter = src.RetryJitter },
	"max_keys":        func(dst, src *ruleconfig.Rule) { dst.MaxKeys = src.MaxKeys },
	"problem_json":    func(dst, src *ruleconfig.Rule) { dst.ProblemJSON = src.ProblemJSON },
	"log_key":         func(dst, src *ruleconfig.Rule) { dst.LogKey = src.LogKey },
	"disable_metrics": func(dst, src *ruleconfig.Rule) { dst.DisableMetrics = src.DisableMetrics },
	"ipv4_prefix":     func(dst, src *ruleconfig.Rule) { dst.IPv4Prefix = src.IPv4Prefix },
	"ipv6_prefix":     func(dst, src *ruleconfig.Rule) { dst.IPv6Prefix = src.IPv6Prefix },
	"geo_multiplier":  func(dst, src *ruleconfig.Rule) { dst.GeoMultiplier = maps.Clone(src.GeoMultiplier) },
	"tier":            func(dst, src *ruleconfig.Rule) { dst.Tiers = maps.Clone(src.Tiers) },
	"tier_by":         func(dst, src *ruleconfig.Rule) { dst.TierBy = src.TierBy },
	"key_hash":        func(dst, src *ruleconfig.Rule) { dst.KeyHash = src.KeyHash },
	"match":           func(dst, src *ruleconfig.Rule) { dst.MatcherSetsRaw = slices.Clone(src.MatcherSetsRaw) },
	"store":           func(dst, src *ruleconfig.Rule) { dst.Store = src.Store },
	"on_store_error":  func(dst, src *ruleconfig.Rule) { dst.OnStoreError = src.OnStoreError },
	"max_concurrent":  func(dst, src *ruleconfig.Rule) { dst.MaxConcurrent = src.MaxConcurrent },
	"lease_timeout":   func(dst, src *ruleconfig.Rule) { dst.LeaseTimeout = src.LeaseTimeout },
}

// inherit fills in what s does not set from the defaults.
func (s *ruleSpec) inherit(defaults *ruleSpec) {
	for sub, copyField := range inheritedFields {
		if !s.has(sub) && defaults.has(sub) {
			copyField(&s.rule, &defaults.rule)
			s.set[sub] = defaults.set[sub]
		}
	}
}

// finish checks the complete rule; errors point at the line that set the
// offending value where there is one, else at the rule's first line.
func (s *ruleSpec) finish() error {
	r := &s.rule
	if r.MaxDelay != 0 && r.Algorithm != string(limiter.LeakyBucket) {
		algo := r.Algorithm
		if algo == "" {
			algo = string(limiter.SlidingWindow)
		}
		return errAtToken(s.set["max_delay"], "rule %q: max_delay applies to leaky_bucket only, not %s", r.Name, algo)
	}
	if len(r.Limits) == 0 && r.MaxConcurrent == 0 {
		return errAtToken(s.start, "rule %q has no limit: add `limit <count> <window>`", r.Name)
	}
	if err := r.CheckConcurrent(); err != nil {
		return errAtToken(s.at("max_concurrent"), "rule %q: %v", r.Name, err)
	}
	if err := r.CheckMaxHeld(); err != nil {
		return errAtToken(s.set["max_held"], "rule %q: %v", r.Name, err)
	}
	if n, err := strconv.ParseInt(r.Cost, 10, 64); err == nil {
		if err := r.CheckCost(n); err != nil {
			return errAtToken(s.set["cost"], "rule %q: %v", r.Name, err)
		}
	}
	if err := s.finishAbuse(); err != nil {
		return err
	}
	if err := r.CheckStore(); err != nil {
		at := s.set["store"]
		if at.Text == "" {
			at = s.set["on_store_error"]
		}
		return errAtToken(at, "rule %q: %v", r.Name, err)
	}
	if err := validateRule(*r); err != nil {
		return errAtToken(s.start, "rule %q: %v", r.Name, err)
	}
	return nil
}

// errAtToken is an error at tok's line, as d.Errf makes them.
func errAtToken(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}

// parseSubdirective reads one rule subdirective, d being at its name.
func (s *ruleSpec) parseSubdirective(d *caddyfile.Dispenser) error {
	return s.parseAs(d, d.Val())
}

// parseAs reads the subdirective d is at as sub (the name it has in
// inheritedFields): caddy-ratelimit's jitter is read as retry_jitter.
func (s *ruleSpec) parseAs(d *caddyfile.Dispenser, sub string) error {
	if _, known := inheritedFields[sub]; !known && sub != "name" {
		return d.Errf("unrecognized subdirective %q", sub)
	}
	if tok, dup := s.set[sub]; dup && !repeatableSubdirectives[sub] {
		return d.Errf("%s already given on line %d", tok.Text, tok.Line)
	}
	if !s.has(sub) {
		s.set[sub] = d.Token()
	}
	r := &s.rule
	switch sub {
	case "name":
		return oneArg(d, &r.Name)

	case "limit":
		var count, window string
		if !d.AllArgs(&count, &window) {
			return d.ArgErr()
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 || n > limiter.MaxCount {
			return d.Errf("limit %s: the count must be a whole number from 1 to %d", count, int64(limiter.MaxCount))
		}
		w, err := durationArg(d, "limit window", window)
		if err != nil {
			return err
		}
		if w < limiter.MinWindow || w > limiter.MaxWindow {
			return d.Errf("limit window %s: must be between %s and %s", window, limiter.MinWindow, limiter.MaxWindow)
		}
		r.Limits = append(r.Limits, ruleconfig.Limit{Count: n, Window: caddy.Duration(w)})
		if err := ruleconfig.CheckWindows(r.Limits); err != nil {
			return d.Errf("%v", err)
		}

	case "algorithm":
		if err := oneArg(d, &r.Algorithm); err != nil {
			return err
		}
		switch limiter.Algorithm(r.Algorithm) {
		case limiter.SlidingWindow, limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket:
		default:
			return d.Errf("unknown algorithm %q: want sliding_window, fixed_window, sliding_log, token_bucket or leaky_bucket", r.Algorithm)
		}

	case "burst":
		var arg string
		if err := oneArg(d, &arg); err != nil {
			return err
		}
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 || n > limiter.MaxCount {
			return d.Errf("burst %s: must be a whole number from 0 to %d", arg, int64(limiter.MaxCount))
		}
		r.Burst = n

	case "max_delay":
		var arg string
		if err := oneArg(d, &arg); err != nil {
			return err
		}
		delay, err := durationArg(d, "max_delay", arg)
		if err != nil {
			return err
		}
		if delay <= 0 {
			return d.Errf("max_delay %s: must be positive", arg)
		}
		r.MaxDelay = caddy.Duration(delay)

	case "max_held":
		return countArg(d, &r.MaxHeld)

	case "max_concurrent":
		return countArg(d, &r.MaxConcurrent)

	case "lease_timeout":
		t, err := intervalArg(d, "lease_timeout")
		r.LeaseTimeout = caddy.Duration(t)
		return err

	case "by":
		words, err := parseBy(d)
		if err != nil {
			return err
		}
		r.By = append(r.By, words...)

	case "on_missing_key":
		if err := oneArg(d, &r.OnMissingKey); err != nil {
			return err
		}
		switch r.OnMissingKey {
		case ruleconfig.MissingSkip, ruleconfig.MissingIP, ruleconfig.MissingDeny:
		default:
			return d.Errf("on_missing_key %q: want skip, ip or deny", r.OnMissingKey)
		}

	case "cost":
		if err := oneArg(d, &r.Cost); err != nil {
			return err
		}
		if !strings.Contains(r.Cost, "{") {
			if n, err := strconv.ParseInt(r.Cost, 10, 64); err != nil || n < 1 {
				return d.Errf("cost %q: want a whole number ≥ 1 or a {placeholder}", r.Cost)
			}
		}

	case "shadow":
		return flagArg(d, &r.Shadow)

	case "scope":
		if err := oneArg(d, &r.Scope); err != nil {
			return err
		}
		switch r.Scope {
		case ruleconfig.ScopeCluster, ruleconfig.ScopeNode:
		default:
			return d.Errf("scope %q: want cluster or node", r.Scope)
		}

	case "exempt":
		ranges := d.RemainingArgs()
		if len(ranges) == 0 {
			return d.ArgErr()
		}
		for _, cidr := range ranges {
			if _, err := ruleconfig.ParsePrefix(cidr); err != nil {
				return d.Errf("%v", err)
			}
		}
		r.Exempt = append(r.Exempt, ranges...)

	case "headers":
		if err := oneArg(d, &r.Headers); err != nil {
			return err
		}
		switch r.Headers {
		case ruleconfig.HeadersIETF, ruleconfig.HeadersLegacy, ruleconfig.HeadersBoth, ruleconfig.HeadersOff:
		default:
			return d.Errf("headers %q: want ietf, legacy, both or off", r.Headers)
		}

	case "retry_jitter":
		return parseJitter(d, r)

	case "max_keys":
		return countArg(d, &r.MaxKeys)

	case "problem_json":
		return flagArg(d, &r.ProblemJSON)

	case "log_key":
		return flagArg(d, &r.LogKey)

	case "disable_metrics":
		return flagArg(d, &r.DisableMetrics)

	case "ipv4_prefix", "ipv6_prefix":
		dst, most := &r.IPv4Prefix, 32
		if sub == "ipv6_prefix" {
			dst, most = &r.IPv6Prefix, 128
		}
		bits, err := prefixArg(d, sub, most)
		if err != nil {
			return err
		}
		*dst = bits

	case "key_hash":
		if err := oneArg(d, &r.KeyHash); err != nil {
			return err
		}
		if r.KeyHash != ruleconfig.KeyHashSHA256 {
			return d.Errf("key_hash %q: want sha256", r.KeyHash)
		}

	case "tier":
		args := d.RemainingArgs()
		if len(args) < 2 {
			return d.Errf("tier: want a name and its limits, as in `tier pro 1000/1m`")
		}
		if _, dup := r.Tiers[args[0]]; dup {
			return d.Errf("tier %s given twice", args[0])
		}
		for _, spec := range args[1:] {
			if _, _, err := ruleconfig.ParseTierLimit(spec); err != nil {
				return d.Errf("tier %s: %v", args[0], err)
			}
		}
		if r.Tiers == nil {
			r.Tiers = make(map[string][]string)
		}
		r.Tiers[args[0]] = args[1:]

	case "tier_by":
		words, err := parseBy(d)
		if err != nil {
			return err
		}
		if len(words) != 1 {
			return d.Errf("tier_by: want one source, such as jwt plan or header X-Plan")
		}
		r.TierBy = words[0]

	case "geo_multiplier":
		m, err := geo.ParseMultipliers(d.RemainingArgs())
		if err != nil {
			return d.Errf("geo_multiplier: %v", err)
		}
		r.GeoMultiplier = m.Map()

	case "store":
		if err := oneArg(d, &r.Store); err != nil {
			return err
		}
		if r.Store != ruleconfig.StoreLocal && r.Store != ruleconfig.StoreRedis {
			return d.Errf("store %q: want local or redis", r.Store)
		}

	case "on_store_error":
		if err := oneArg(d, &r.OnStoreError); err != nil {
			return err
		}
		switch r.OnStoreError {
		case ruleconfig.StoreErrorLocal, ruleconfig.StoreErrorFailOpen, ruleconfig.StoreErrorFailClosed:
		default:
			return d.Errf("on_store_error %q: want local, fail_open or fail_closed", r.OnStoreError)
		}

	case "block_for", "block_reset", "count_status", "cost_header":
		return parseAbuseSubdirective(d, r, sub)

	case "match":
		set, err := caddyhttp.ParseCaddyfileNestedMatcherSet(d)
		if err != nil {
			return err
		}
		r.MatcherSetsRaw = append(r.MatcherSetsRaw, set)
	}
	return nil
}

// keyArgSources are the `by` sources that take the next word as their
// argument.
var keyArgSources = map[string]bool{"header": true, "query": true, "cookie": true, "jwt": true, "static": true}

// parseBy reads the sources of one `by` line: `by header X-API-Key user_id`
// is "header X-API-Key" and "user_id".
func parseBy(d *caddyfile.Dispenser) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	var words []string
	for i := 0; i < len(args); i++ {
		word := args[i]
		if keyArgSources[word] {
			if i+1 == len(args) {
				return nil, d.Errf("by %s: want a name, as in `by %s NAME`", word, word)
			}
			i++
			word += " " + args[i]
		}
		if _, err := parseKeySource(word); err != nil {
			return nil, d.Errf("%v", err)
		}
		words = append(words, word)
	}
	return words, nil
}

// parseJitter reads retry_jitter (or caddy-ratelimit's jitter) into r.
func parseJitter(d *caddyfile.Dispenser, r *ruleconfig.Rule) error {
	sub := d.Val()
	var arg string
	if err := oneArg(d, &arg); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(arg, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 10 {
		return d.Errf("%s %s: want a fraction of the wait from 0 to 10 (0.2 adds up to 20%%)", sub, arg)
	}
	r.RetryJitter = f
	return nil
}

// oneArg reads the subdirective's single argument into dst.
func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

// flagArg sets a subdirective that takes no argument.
// prefixArg reads the prefix length of ipv4_prefix or ipv6_prefix: 1 to
// most bits.
func prefixArg(d *caddyfile.Dispenser, sub string, most int) (int, error) {
	var arg string
	if err := oneArg(d, &arg); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > most {
		return 0, d.Errf("%s %s: must be a whole number from 1 to %d", sub, arg, most)
	}
	return n, nil
}

func flagArg(d *caddyfile.Dispenser, dst *bool) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	*dst = true
	return nil
}

// countArg reads the one argument of the subdirective d is at, a whole
// number of at least 1, into n.
func countArg(d *caddyfile.Dispenser, n *int) error {
	sub := d.Val()
	var arg string
	if err := oneArg(d, &arg); err != nil {
		return err
	}
	v, err := strconv.Atoi(arg)
	if err != nil || v < 1 {
		return d.Errf("%s %s: must be a whole number of at least 1", sub, arg)
	}
	*n = v
	return nil
}

// intervalArg reads the one argument of subdirective `what`: a duration
// greater than zero.
func intervalArg(d *caddyfile.Dispenser, what string) (time.Duration, error) {
	var arg string
	if err := oneArg(d, &arg); err != nil {
		return 0, err
	}
	every, err := durationArg(d, what, arg)
	if err != nil {
		return 0, err
	}
	if every <= 0 {
		return 0, d.Errf("%s %s: must be positive", what, arg)
	}
	return every, nil
}

// durationArg reads a Caddy duration ("1m", "1d"), naming what it is in
// the error.
func durationArg(d *caddyfile.Dispenser, what, s string) (time.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err == nil && dur < 0 {
		return 0, d.Errf("%s %s: must not be negative", what, s)
	}
	if err != nil {
		return 0, d.Errf("%s %q: not a duration (such as 500ms, 1m or 1d)", what, s)
	}
	return dur, nil
}
