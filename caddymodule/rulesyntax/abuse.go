package rulesyntax

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
	"golang.org/x/net/http/httpguts"
)

// The configuration of abuse response: block_for, block_reset,
// count_status and cost_header (their subdirectives: the rules file's YAML goes
// through them too; the fields and their checks are package ruleconfig's).

func init() {
	// the subdirectives are inherited from the top of a rate_limit block
	// like every other
	inheritedFields["block_for"] = func(dst, src *ruleconfig.Rule) { dst.BlockFor = slices.Clone(src.BlockFor) }
	inheritedFields["block_reset"] = func(dst, src *ruleconfig.Rule) { dst.BlockReset = src.BlockReset }
	inheritedFields["count_status"] = func(dst, src *ruleconfig.Rule) { dst.CountStatus = slices.Clone(src.CountStatus) }
	inheritedFields["cost_header"] = func(dst, src *ruleconfig.Rule) { dst.CostHeader = src.CostHeader }
}

// parseAbuseSubdirective reads block_for, block_reset, count_status or
// cost_header (sub) into r, d being at its name.
func parseAbuseSubdirective(d *caddyfile.Dispenser, r *ruleconfig.Rule, sub string) error {
	switch sub {
	case "block_for":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("block_for: want one or more durations, as in `block_for 1m 10m 1h`")
		}
		for _, a := range args {
			dur, err := DurationArg(d, "block_for", a)
			if err != nil {
				return err
			}
			if err := ruleconfig.CheckBlockFor([]caddy.Duration{caddy.Duration(dur)}); err != nil {
				return d.Errf("%v", err)
			}
			r.BlockFor = append(r.BlockFor, caddy.Duration(dur))
		}
	case "block_reset":
		dur, err := IntervalArg(d, "block_reset")
		if err != nil {
			return err
		}
		if dur > limiter.MaxWindow {
			return d.Errf("block_reset %s: must be at most %s", dur, limiter.MaxWindow)
		}
		r.BlockReset = caddy.Duration(dur)
	case "count_status":
		args := d.RemainingArgs()
		if _, err := ruleconfig.ParseStatuses(args); err != nil {
			return d.Errf("%v", err)
		}
		r.CountStatus = args
	case "cost_header":
		if err := OneArg(d, &r.CostHeader); err != nil {
			return err
		}
		if !httpguts.ValidHeaderFieldName(r.CostHeader) {
			return d.Errf("cost_header %q: not a valid header name", r.CostHeader)
		}
	}
	return nil
}

// finishAbuse checks what abuse response's subdirectives need of the rest
// of the rule, at the line of the subdirective.
func (s *Spec) finishAbuse() error {
	r := &s.Rule
	if r.BlockReset != 0 && len(r.BlockFor) == 0 {
		return ErrAt(s.Set["block_reset"], "rule %q: block_reset without block_for: there are no blocks to forget", r.Name)
	}
	if r.Algorithm == string(limiter.LeakyBucket) {
		for _, sub := range []string{"count_status", "cost_header"} {
			if s.Has(sub) {
				return ErrAt(s.Set[sub], "rule %q: %s takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket", r.Name, sub)
			}
		}
	}
	if err := r.CheckAbuse(); err != nil {
		at := s.Set["block_for"]
		if at.Text == "" {
			at = s.Start
		}
		return ErrAt(at, "rule %q: %v", r.Name, err)
	}
	return nil
}
