package rulesyntax

// The rules of a rate_limit block: one rule's subdirectives, what a rule
// block inherits from the top of the block, and the argument readers.

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/limiter"
)

// ParseRuleBlock reads `rule NAME { … }`.
func ParseRuleBlock(d *caddyfile.Dispenser, checks Checks) (*Spec, error) {
	spec := NewSpec(d.Token(), checks)
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	spec.Rule.Name = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "name":
			return nil, d.Errf("name in a rule block: the rule is named by `rule %s`", spec.Rule.Name)
		case "rule", "zone", "jitter", "sweep_interval", "distributed", "storage":
			return nil, d.Errf("%s cannot be inside a rule block", d.Val())
		}
		if err := spec.Parse(d); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// Spec is a rule as one block gives it, with the subdirectives it
// sets, so that defaults fill in only the others.
type Spec struct {
	Rule  ruleconfig.Rule
	Start caddyfile.Token // where the rule begins, for errors about all of it
	Block                 // the subdirectives given, at their first line

	checks Checks
}

// Checks are the checks of a rule that need the package that provisions
// rules (caddymodule): the syntax reads a rule, they tell whether it
// would load, so that an error points at the line that caused it. A nil
// check passes everything.
type Checks struct {
	// KeySource checks one source of `by` ("ip/24", "header X-Key").
	KeySource func(word string) error
	// Rule checks the complete rule: everything provisioning refuses.
	Rule func(ruleconfig.Rule) error
}

// NewSpec is an empty rule that starts at start, read with checks.
func NewSpec(start caddyfile.Token, checks Checks) *Spec {
	return &Spec{Start: start, Block: NewBlock("", repeatableSubdirectives), checks: checks}
}

// At is where subdirective was given, else the rule's first line.
func (s *Spec) At(subdirective string) caddyfile.Token {
	if tok, ok := s.Set[subdirective]; ok {
		return tok
	}
	return s.Start
}

// repeatableSubdirectives add to their list; the others may appear once.
var repeatableSubdirectives = Repeatable("limit", "by", "exempt", "match", "tier")

// inheritedFields copies each field a rule may inherit from the defaults, by
// subdirective. name is not inherited.
var inheritedFields = map[string]func(dst, src *ruleconfig.Rule){
	"limit":           func(dst, src *ruleconfig.Rule) { dst.Limits = slices.Clone(src.Limits) },
	"algorithm":       func(dst, src *ruleconfig.Rule) { dst.Algorithm = src.Algorithm },
	"timezone":        func(dst, src *ruleconfig.Rule) { dst.Timezone = src.Timezone },
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
	"max_overrides":   func(dst, src *ruleconfig.Rule) { dst.MaxOverrides = src.MaxOverrides },
	"problem_json":    func(dst, src *ruleconfig.Rule) { dst.ProblemJSON = src.ProblemJSON },
	"log_key":         func(dst, src *ruleconfig.Rule) { dst.LogKey = src.LogKey },
	"disable_metrics": func(dst, src *ruleconfig.Rule) { dst.DisableMetrics = src.DisableMetrics },
	"ipv4_prefix":     func(dst, src *ruleconfig.Rule) { dst.IPv4Prefix = src.IPv4Prefix },
	"ipv6_prefix":     func(dst, src *ruleconfig.Rule) { dst.IPv6Prefix = src.IPv6Prefix },
	"geo_multiplier":  func(dst, src *ruleconfig.Rule) { dst.GeoMultiplier = maps.Clone(src.GeoMultiplier) },
	"asn_multiplier":  func(dst, src *ruleconfig.Rule) { dst.ASNMultiplier = maps.Clone(src.ASNMultiplier) },
	"tier":            func(dst, src *ruleconfig.Rule) { dst.Tiers = maps.Clone(src.Tiers) },
	"tier_by":         func(dst, src *ruleconfig.Rule) { dst.TierBy = src.TierBy },
	"key_hash":        func(dst, src *ruleconfig.Rule) { dst.KeyHash = src.KeyHash },
	"match":           func(dst, src *ruleconfig.Rule) { dst.MatcherSetsRaw = slices.Clone(src.MatcherSetsRaw) },
	"store":           func(dst, src *ruleconfig.Rule) { dst.Store = src.Store },
	"on_store_error":  func(dst, src *ruleconfig.Rule) { dst.OnStoreError = src.OnStoreError },
	"max_concurrent":  func(dst, src *ruleconfig.Rule) { dst.MaxConcurrent = src.MaxConcurrent },
	"lease_timeout":   func(dst, src *ruleconfig.Rule) { dst.LeaseTimeout = src.LeaseTimeout },
}

// Subdirectives are the names of a rule's subdirectives, sorted: what the
// top of a rate_limit block, a rule block (all but name) and a rules file
// entry may give.
func Subdirectives() []string {
	names := append(slices.Collect(maps.Keys(inheritedFields)), "name") // name is not inherited
	slices.Sort(names)
	return names
}

// Inherit fills in what s does not set from the defaults. A timezone
// given at the top is the block's calendar: a rule without a calendar
// limit does not take it (where its own would be an error).
func (s *Spec) Inherit(defaults *Spec) {
	ownTimezone := s.Has("timezone")
	for sub, copyField := range inheritedFields {
		if !s.Has(sub) && defaults.Has(sub) {
			copyField(&s.Rule, &defaults.Rule)
			s.Set[sub] = defaults.Set[sub]
		}
	}
	if !ownTimezone && !s.Rule.HasCalendar() {
		s.Rule.Timezone = ""
		delete(s.Set, "timezone")
	}
}

// Finish checks the complete rule; errors point at the line that set the
// offending value where there is one, else at the rule's first line.
func (s *Spec) Finish() error {
	r := &s.Rule
	if r.MaxDelay != 0 && r.Algorithm != string(limiter.LeakyBucket) {
		return ErrAt(s.Set["max_delay"], "rule %q: max_delay applies to leaky_bucket only, not %s", r.Name, r.AlgorithmInForce())
	}
	if err := s.finishCalendar(); err != nil {
		return err
	}
	if len(r.Limits) == 0 && r.MaxConcurrent == 0 {
		return ErrAt(s.Start, "rule %q has no limit: add `limit <count> <window>`", r.Name)
	}
	if err := r.CheckConcurrent(); err != nil {
		return ErrAt(s.At("max_concurrent"), "rule %q: %v", r.Name, err)
	}
	if err := r.CheckMaxHeld(); err != nil {
		return ErrAt(s.Set["max_held"], "rule %q: %v", r.Name, err)
	}
	if n, err := strconv.ParseInt(r.Cost, 10, 64); err == nil {
		if err := r.CheckCost(n); err != nil {
			return ErrAt(s.Set["cost"], "rule %q: %v", r.Name, err)
		}
	}
	if err := s.finishAbuse(); err != nil {
		return err
	}
	if err := r.CheckStore(); err != nil {
		at := s.Set["store"]
		if at.Text == "" {
			at = s.Set["on_store_error"]
		}
		return ErrAt(at, "rule %q: %v", r.Name, err)
	}
	if s.checks.Rule != nil {
		if err := s.checks.Rule(*r); err != nil {
			return ErrAt(s.Start, "rule %q: %v", r.Name, err)
		}
	}
	return nil
}

// ErrAt is an error at tok's line, as d.Errf makes them.
func ErrAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}

// Parse reads one rule subdirective, d being at its name.
func (s *Spec) Parse(d *caddyfile.Dispenser) error {
	return s.ParseAs(d, d.Val())
}

// ParseAs reads the subdirective d is at as sub (the name it has in
// inheritedFields): caddy-ratelimit's jitter is read as retry_jitter.
func (s *Spec) ParseAs(d *caddyfile.Dispenser, sub string) error {
	if _, known := inheritedFields[sub]; !known && sub != "name" {
		return d.Errf("unrecognized subdirective %q", sub)
	}
	if err := s.Take(d, sub); err != nil {
		return err
	}
	r := &s.Rule
	switch sub {
	case "name":
		return OneArg(d, &r.Name)

	case "limit":
		var count, window string
		if !d.AllArgs(&count, &window) {
			return d.ArgErr()
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 || n > limiter.MaxCount {
			return d.Errf("limit %s: the count must be a whole number from 1 to %d", count, int64(limiter.MaxCount))
		}
		l, err := limitWindow(d, window)
		if err != nil {
			return err
		}
		l.Count = n
		r.Limits = append(r.Limits, l)
		if err := ruleconfig.CheckWindows(r.Limits); err != nil {
			return d.Errf("%v", err)
		}

	case "timezone":
		if err := OneArg(d, &r.Timezone); err != nil {
			return err
		}
		if _, err := ruleconfig.LoadTimezone(r.Timezone); err != nil {
			return d.Errf("%v", err)
		}

	case "algorithm":
		if err := OneArg(d, &r.Algorithm); err != nil {
			return err
		}
		switch limiter.Algorithm(r.Algorithm) {
		case limiter.SlidingWindow, limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket:
		default:
			return d.Errf("unknown algorithm %q: want sliding_window, fixed_window, sliding_log, token_bucket or leaky_bucket", r.Algorithm)
		}

	case "burst":
		var arg string
		if err := OneArg(d, &arg); err != nil {
			return err
		}
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 || n > limiter.MaxCount {
			return d.Errf("burst %s: must be a whole number from 0 to %d", arg, int64(limiter.MaxCount))
		}
		r.Burst = n

	case "max_delay":
		var arg string
		if err := OneArg(d, &arg); err != nil {
			return err
		}
		delay, err := DurationArg(d, "max_delay", arg)
		if err != nil {
			return err
		}
		if delay <= 0 {
			return d.Errf("max_delay %s: must be positive", arg)
		}
		r.MaxDelay = caddy.Duration(delay)

	case "max_held":
		return CountArg(d, &r.MaxHeld)

	case "max_concurrent":
		return CountArg(d, &r.MaxConcurrent)

	case "lease_timeout":
		t, err := IntervalArg(d, "lease_timeout")
		r.LeaseTimeout = caddy.Duration(t)
		return err

	case "by":
		words, err := parseBy(d, s.checks.KeySource)
		if err != nil {
			return err
		}
		r.By = append(r.By, words...)

	case "on_missing_key":
		return wordArg(d, sub, &r.OnMissingKey)

	case "cost":
		if err := OneArg(d, &r.Cost); err != nil {
			return err
		}
		if !strings.Contains(r.Cost, "{") {
			if n, err := strconv.ParseInt(r.Cost, 10, 64); err != nil || n < 1 {
				return d.Errf("cost %q: want a whole number ≥ 1 or a {placeholder}", r.Cost)
			}
		}

	case "shadow":
		return FlagArg(d, &r.Shadow)

	case "scope":
		return wordArg(d, sub, &r.Scope)

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
		return wordArg(d, sub, &r.Headers)

	case "retry_jitter":
		return parseJitter(d, r)

	case "max_keys":
		return CountArg(d, &r.MaxKeys)

	case "max_overrides":
		return CountArg(d, &r.MaxOverrides)

	case "problem_json":
		return FlagArg(d, &r.ProblemJSON)

	case "log_key":
		return FlagArg(d, &r.LogKey)

	case "disable_metrics":
		return FlagArg(d, &r.DisableMetrics)

	case "ipv4_prefix", "ipv6_prefix":
		dst, most := &r.IPv4Prefix, 32
		if sub == "ipv6_prefix" {
			dst, most = &r.IPv6Prefix, 128
		}
		bits, err := PrefixArg(d, sub, most)
		if err != nil {
			return err
		}
		*dst = bits

	case "key_hash":
		return wordArg(d, sub, &r.KeyHash)

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
		words, err := parseBy(d, s.checks.KeySource)
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

	case "asn_multiplier":
		m, err := geo.ParseASNMultipliers(d.RemainingArgs())
		if err != nil {
			return d.Errf("asn_multiplier: %v", err)
		}
		r.ASNMultiplier = m.Map()

	case "store":
		return wordArg(d, sub, &r.Store)

	case "on_store_error":
		return wordArg(d, sub, &r.OnStoreError)

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
