package caddymodule

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
// span; writeHeaders shows the period in force instead).
func policyHeader(names []string, limits []ruleconfig.Limit) string {
	var b []byte
	for i, l := range limits {
		b = appendItem(b, 0, names[i], "q", l.Count, "w", ceilSeconds(l.Span()))
	}
	return string(b)
}

// appendItem appends a structured-field list item, a string with two
// integer parameters, to the list that starts at b[list:].
func appendItem(b []byte, list int, name, k1 string, v1 int64, k2 string, v2 int64) []byte {
	if len(b) > list {
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
	hdrRetryAfter      = "Retry-After"
)

// setHeaders writes a rule's rate-limit headers for decision d.
func (r *rule) setHeaders(h http.Header, d *limiter.Decision) {
	if r.ietf || r.legacy {
		r.writeHeaders(h, d, 0)
	}
}

// writeHeaders writes a rule's rate-limit headers for decision d and,
// for a refusal (retryAfterSec > 0), Retry-After, each with one map
// write, all of them in one allocation. A refusal's headerValues is
// returned, for its placeholders.
func (r *rule) writeHeaders(h http.Header, d *limiter.Decision, retryAfterSec int64) *headerValues {
	n := 0
	if r.ietf {
		n += 2
	}
	if r.legacy {
		n += 3
	}
	w := newHeaderWriter(h, n, retryAfterSec > 0)
	if r.ietf {
		list := len(w.b)
		for i := 0; i < d.Len; i++ {
			q := &d.Quotas[i]
			w.b = appendItem(w.b, list, r.policies[i], "r", q.Remaining, "t", ceilSeconds(q.Effective))
		}
		w.add(hdrRateLimit, w.value(list))
		policy := r.policy
		if r.calendar || r.scaled(d) {
			list = len(w.b)
			for i := 0; i < d.Len; i++ {
				w.b = appendItem(w.b, list, r.policies[i], "q", d.Quotas[i].Limit, "w", ceilSeconds(d.Quotas[i].Window))
			}
			policy = w.value(list)
		}
		w.add(hdrRateLimitPolicy, policy)
	}
	if r.legacy {
		q := d.Binding()
		w.setInt(hdrLimit, q.Limit)
		w.setInt(hdrRemaining, q.Remaining)
		w.setInt(hdrReset, ceilSeconds(q.Reset))
	}
	if retryAfterSec > 0 {
		w.setInt(hdrRetryAfter, retryAfterSec)
	}
	return w.v
}

// headerValues is a refusal's rate-limit header values in one
// allocation: the one-value slices the header map holds (RateLimit,
// RateLimit-Policy, the three X-RateLimit fields, Retry-After), the bytes
// of the values formatted for this response, and what its placeholders
// show (refuse.go). A value that outgrows buf is formatted into an array
// of its own.
type headerValues struct {
	vals  [6]string
	shown shownRefusal
	buf   [64]byte
}

// allowedValues is headerValues for the common allowed response:
// RateLimit and RateLimit-Policy, no more.
type allowedValues struct {
	vals [2]string
	buf  [48]byte
}

// headerWriter writes header values into h, into one allocation: each
// value is appended to b, then made a string of those bytes, which are
// never written again, and put in vals, whose one-value slices the map
// holds.
type headerWriter struct {
	h    http.Header
	v    *headerValues // nil when the values are an allowedValues
	vals []string
	b    []byte // the values' buf, or the array a value outgrew it into
}

// newHeaderWriter is a headerWriter into h with room for n values: an
// allowedValues for two or fewer, unless the refusal's placeholders need
// a headerValues.
func newHeaderWriter(h http.Header, n int, refusal bool) headerWriter {
	if n <= 2 && !refusal {
		v := new(allowedValues)
		return headerWriter{h: h, vals: v.vals[:0], b: v.buf[:0]}
	}
	v := new(headerValues)
	return headerWriter{h: h, v: v, vals: v.vals[:0], b: v.buf[:0]}
}

// value is what was appended to b since start, as a string: no copy, as
// what is appended later goes after it (or into a new array).
func (w *headerWriter) value(start int) string {
	if len(w.b) == start {
		return ""
	}
	return unsafe.String(&w.b[start], len(w.b)-start)
}

// set makes s key's one value.
func (w *headerWriter) set(key, s string) {
	n := len(w.vals)
	w.vals = append(w.vals, s) // within its array: newHeaderWriter counted
	w.h[key] = w.vals[n : n+1 : n+1]
}

// setInt makes v, in decimal, key's one value.
func (w *headerWriter) setInt(key string, v int64) {
	start := len(w.b)
	w.b = strconv.AppendInt(w.b, v, 10)
	w.set(key, w.value(start))
}

// add adds s to key's values: RateLimit and RateLimit-Policy hold an
// item list a rule.
func (w *headerWriter) add(key, s string) {
	if old := w.h[key]; old != nil {
		w.h[key] = append(old, s)
		return
	}
	w.set(key, s)
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
