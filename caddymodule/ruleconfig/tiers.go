package ruleconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/edgebyte/edgelimit/limiter"
)

// ParseTiers compiles a rule's tiers into the factor each gives its
// limits.
func ParseTiers(tiers map[string][]string, limits []Limit) (map[string]float64, error) {
	if len(tiers) == 0 {
		return nil, nil
	}
	out := make(map[string]float64, len(tiers))
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range tiers {
			if !yield(n) {
				return
			}
		}
	}) {
		specs := tiers[name]
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("tier %q: a tier name is one word", name)
		}
		if len(specs) != len(limits) {
			return nil, fmt.Errorf("tier %s: gives %d limits; the rule has %d (one COUNT/WINDOW per limit, in the rule's order)", name, len(specs), len(limits))
		}
		factor := 0.0
		for i, spec := range specs {
			count, window, err := ParseTierLimit(spec)
			if err != nil {
				return nil, fmt.Errorf("tier %s: %v", name, err)
			}
			if window != limits[i].Span() || tierPeriod(spec) != limits[i].Period {
				return nil, fmt.Errorf("tier %s: %s: the window must be the rule's, %s", name, spec, limits[i].Text())
			}
			f := float64(count) / float64(limits[i].Count)
			if i > 0 && !sameFactor(f, factor) {
				return nil, fmt.Errorf("tier %s: scales the rule's limits by different factors; a tier scales every limit by one factor", name)
			}
			factor = f
		}
		out[name] = factor
	}
	return out, nil
}

// sameFactor is true if a and b are equal up to float error.
func sameFactor(a, b float64) bool {
	if a == b {
		return true
	}
	d := a - b
	return d < 1e-9*max(a, b) && -d < 1e-9*max(a, b)
}

// tierPeriod is the calendar period of a tier's "1000/day", else "".
func tierPeriod(spec string) string {
	_, w, _ := strings.Cut(spec, "/")
	if _, err := limiter.ParsePeriod(w); err != nil {
		return ""
	}
	return w
}

// ParseTierLimit reads "1000/1m", or "1000/day" for a calendar limit (its
// window being the period's span).
func ParseTierLimit(spec string) (int64, time.Duration, error) {
	c, w, ok := strings.Cut(spec, "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want COUNT/WINDOW, such as 1000/1m", spec)
	}
	count, err := strconv.ParseInt(c, 10, 64)
	if err != nil || count < 0 {
		return 0, 0, fmt.Errorf("%q: the count must be a whole number ≥ 0 (0 blocks the tier)", spec)
	}
	if p, err := limiter.ParsePeriod(w); err == nil {
		return count, p.Span(), nil
	}
	window, err := caddy.ParseDuration(w)
	if err != nil || window <= 0 {
		return 0, 0, fmt.Errorf("%q: the window must be a duration such as 1m, or a calendar period (day, week, month, year)", spec)
	}
	return count, window, nil
}
