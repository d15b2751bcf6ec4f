package caddymodule

// The configuration of abuse response: block_for, block_reset,
// count_status and cost_header (Rule's fields, their Caddyfile
// subdirectives, which the rules file's YAML goes through too, and their
// checks).

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/net/http/httpguts"

	"github.com/edgebyte/edgelimit/limiter"
)

func init() {
	// the subdirectives are inherited from the top of a rate_limit block
	// like every other
	inheritedFields["block_for"] = func(dst, src *Rule) { dst.BlockFor = slices.Clone(src.BlockFor) }
	inheritedFields["block_reset"] = func(dst, src *Rule) { dst.BlockReset = src.BlockReset }
	inheritedFields["count_status"] = func(dst, src *Rule) { dst.CountStatus = slices.Clone(src.CountStatus) }
	inheritedFields["cost_header"] = func(dst, src *Rule) { dst.CostHeader = src.CostHeader }
}

// statusSet is a set of HTTP statuses, 100 to 599, one bit each.
type statusSet [8]uint64

// has reports whether code is in the set.
func (s *statusSet) has(code int) bool {
	i := code - 100
	return i >= 0 && i < 500 && s[i>>6]&(1<<(i&63)) != 0
}

// add puts code in the set.
func (s *statusSet) add(code int) { i := code - 100; s[i>>6] |= 1 << (i & 63) }

// parseStatuses reads count_status's values: codes from 100 to 599, or
// classes from 1xx to 5xx.
func parseStatuses(values []string) (statusSet, error) {
	var s statusSet
	if len(values) == 0 {
		return s, fmt.Errorf("count_status: want at least one status code (401) or class (4xx)")
	}
	for _, v := range values {
		if len(v) == 3 && v[0] >= '1' && v[0] <= '5' && strings.EqualFold(v[1:], "xx") {
			base := int(v[0]-'0') * 100
			for c := base; c < base+100; c++ {
				s.add(c)
			}
			continue
		}
		c, err := strconv.Atoi(v)
		if err != nil || c < 100 || c > 599 || len(v) != 3 {
			return s, fmt.Errorf("count_status %q: want a status code from 100 to 599 or a class from 1xx to 5xx", v)
		}
		s.add(c)
	}
	return s, nil
}

// checkBlockFor checks block_for's durations.
func checkBlockFor(durations []caddy.Duration) error {
	for _, d := range durations {
		if d <= 0 || time.Duration(d) > limiter.MaxWindow {
			return fmt.Errorf("block_for %s: each duration must be above 0 and at most %s", time.Duration(d), limiter.MaxWindow)
		}
	}
	return nil
}

// checkAbuse checks block_for, block_reset, count_status and cost_header,
// alone and together.
func (r *Rule) checkAbuse() error {
	if err := checkBlockFor(r.BlockFor); err != nil {
		return err
	}
	if r.BlockReset < 0 || time.Duration(r.BlockReset) > limiter.MaxWindow {
		return fmt.Errorf("block_reset %s: must be above 0 and at most %s", time.Duration(r.BlockReset), limiter.MaxWindow)
	}
	if r.BlockReset != 0 && len(r.BlockFor) == 0 {
		return fmt.Errorf("block_reset without block_for: there are no blocks to forget")
	}
	if r.CountStatus != nil {
		if _, err := parseStatuses(r.CountStatus); err != nil {
			return err
		}
	}
	if r.CostHeader != "" && !httpguts.ValidHeaderFieldName(r.CostHeader) {
		return fmt.Errorf("cost_header %q: not a valid header name", r.CostHeader)
	}
	if (r.CostHeader != "" || r.CountStatus != nil) && r.Algorithm == string(limiter.LeakyBucket) {
		return fmt.Errorf("count_status and cost_header take units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket")
	}
	if r.Store == storeRedis {
		for _, d := range append(slices.Clone(r.BlockFor), r.BlockReset) {
			if time.Duration(d)%time.Microsecond != 0 {
				return fmt.Errorf("block_for and block_reset %s: must be a whole number of microseconds with store redis", time.Duration(d))
			}
		}
	}
	return nil
}

// blockDurations is block_for, as durations.
func (r *Rule) blockDurations() []time.Duration {
	out := make([]time.Duration, len(r.BlockFor))
	for i, d := range r.BlockFor {
		out[i] = time.Duration(d)
	}
	return out
}

// parseAbuseSubdirective reads block_for, block_reset, count_status or
// cost_header (sub) into r, d being at its name.
func parseAbuseSubdirective(d *caddyfile.Dispenser, r *Rule, sub string) error {
	switch sub {
	case "block_for":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("block_for: want one or more durations, as in `block_for 1m 10m 1h`")
		}
		for _, a := range args {
			dur, err := durationArg(d, "block_for", a)
			if err != nil {
				return err
			}
			if err := checkBlockFor([]caddy.Duration{caddy.Duration(dur)}); err != nil {
				return d.Errf("%v", err)
			}
			r.BlockFor = append(r.BlockFor, caddy.Duration(dur))
		}
	case "block_reset":
		dur, err := intervalArg(d, "block_reset")
		if err != nil {
			return err
		}
		if dur > limiter.MaxWindow {
			return d.Errf("block_reset %s: must be at most %s", dur, limiter.MaxWindow)
		}
		r.BlockReset = caddy.Duration(dur)
	case "count_status":
		args := d.RemainingArgs()
		if _, err := parseStatuses(args); err != nil {
			return d.Errf("%v", err)
		}
		r.CountStatus = args
	case "cost_header":
		if err := oneArg(d, &r.CostHeader); err != nil {
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
func (s *ruleSpec) finishAbuse() error {
	r := &s.rule
	if r.BlockReset != 0 && len(r.BlockFor) == 0 {
		return errAtToken(s.set["block_reset"], "rule %q: block_reset without block_for: there are no blocks to forget", r.Name)
	}
	if r.Algorithm == string(limiter.LeakyBucket) {
		for _, sub := range []string{"count_status", "cost_header"} {
			if s.has(sub) {
				return errAtToken(s.set[sub], "rule %q: %s takes units after the response: a leaky_bucket cannot hold a request for units it does not know yet; use token_bucket", r.Name, sub)
			}
		}
	}
	if err := r.checkAbuse(); err != nil {
		at := s.set["block_for"]
		if at.Text == "" {
			at = s.start
		}
		return errAtToken(at, "rule %q: %v", r.Name, err)
	}
	return nil
}
