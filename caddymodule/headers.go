package caddymodule

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// policyNames are a rule's policy names in the IETF headers, one per
// limit: the rule's name alone when it has one limit, else the name and
// the window ("api-1s", "api-1d").
func policyNames(name string, limits []ruleconfig.Limit) []string {
	name = sfString(name)
	if len(limits) == 1 {
		return []string{name}
	}
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = name + "-" + l.Text()
	}
	return names
}

// sfString makes s fit a structured-field string: printable ASCII, with
// no quote or backslash (rule names may hold an internationalized site
// name); anything else becomes '_'.
func sfString(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, s)
}

// policyHeader is the RateLimit-Policy value of a rule at scale 1:
// `"api";q=100;w=60` items, one per limit (a calendar limit's w being its
// span; setHeaders shows the period in force instead, see policyOf).
func policyHeader(names []string, limits []ruleconfig.Limit) string {
	var b []byte
	for i, l := range limits {
		b = appendItem(b, names[i], "q", l.Count, "w", ceilSeconds(l.Span()))
	}
	return string(b)
}

// appendItem appends a structured-field list item, a string with two
// integer parameters, to a list.
func appendItem(b []byte, name, k1 string, v1 int64, k2 string, v2 int64) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `";`...)
	b = append(b, k1...)
	b = append(b, '=')
	b = strconv.AppendInt(b, v1, 10)
	b = append(b, ';')
	b = append(b, k2...)
	b = append(b, '=')
	return strconv.AppendInt(b, v2, 10)
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// Header names in canonical form, set on the map directly: canonicalizing
// "RateLimit" on every response would allocate.
const (
	hdrRateLimit       = "Ratelimit"
	hdrRateLimitPolicy = "Ratelimit-Policy"
	hdrLimit           = "X-Ratelimit-Limit"
	hdrRemaining       = "X-Ratelimit-Remaining"
	hdrReset           = "X-Ratelimit-Reset"
)

// setHeaders writes a rule's rate-limit headers for decision d.
func (r *rule) setHeaders(h http.Header, d *limiter.Decision) {
	if r.ietf {
		var buf [160]byte
		b := buf[:0]
		for i := 0; i < d.Len; i++ {
			q := d.Quotas[i]
			b = appendItem(b, r.policies[i], "r", q.Remaining, "t", ceilSeconds(q.Effective))
		}
		policy := r.policy
		if r.calendar || r.scaled(d) {
			policy = r.scaledPolicy(d)
		}
		addHeaders(h, string(b), policy)
	}
	if r.legacy {
		q := d.Binding()
		h[hdrLimit] = []string{strconv.FormatInt(q.Limit, 10)}
		h[hdrRemaining] = []string{strconv.FormatInt(q.Remaining, 10)}
		h[hdrReset] = []string{strconv.FormatInt(ceilSeconds(q.Reset), 10)}
	}
}

// denialWait is how long a denied request is told to wait: its
// RetryAfter, and never less than the effective window (t) of a limit
// that had no room for it (draft-11 §6: Retry-After does not point before
// the end of the effective window).
func denialWait(d *limiter.Decision, cost int64) time.Duration {
	wait := d.RetryAfter
	for i := range d.Len {
		if q := &d.Quotas[i]; q.Remaining < cost || q.Limit == 0 {
			wait = max(wait, q.Effective)
		}
	}
	return wait
}

// addHeaders adds RateLimit and RateLimit-Policy values, in one allocation
// when the response has none yet (the common case: one rule).
func addHeaders(h http.Header, limit, policy string) {
	if h[hdrRateLimit] != nil || h[hdrRateLimitPolicy] != nil {
		h[hdrRateLimit] = append(h[hdrRateLimit], limit)
		h[hdrRateLimitPolicy] = append(h[hdrRateLimitPolicy], policy)
		return
	}
	vals := &[2]string{limit, policy}
	h[hdrRateLimit] = vals[0:1:1]
	h[hdrRateLimitPolicy] = vals[1:2:2]
}

// scaled is true if d's limits differ from the configured ones.
func (r *rule) scaled(d *limiter.Decision) bool {
	for i := 0; i < d.Len; i++ {
		if d.Quotas[i].Limit != r.Limits[i].Count {
			return true
		}
	}
	return false
}

// scaledPolicy is RateLimit-Policy with the limits d was decided under,
// in the windows it was decided in: a calendar limit's w is the length of
// the period in force (86400 for a day, 82800 or 90000 on a day the clocks
// change; 28 to 31 days for a month), as its t and Retry-After run to
// that period's end.
func (r *rule) scaledPolicy(d *limiter.Decision) string {
	var buf [160]byte
	b := buf[:0]
	for i := 0; i < d.Len; i++ {
		b = appendItem(b, r.policies[i], "q", d.Quotas[i].Limit, "w", ceilSeconds(d.Quotas[i].Window))
	}
	return string(b)
}
