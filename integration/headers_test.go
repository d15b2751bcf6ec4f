package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// thirtyDays is the window of most tests, in seconds.
const thirtyDays = 30 * 24 * 3600

// rateLimitItem reads the one item of a RateLimit header: "NAME";r=R;t=T.
var rateLimitItem = regexp.MustCompile(`^"([^"]+)";r=(\d+);t=(\d+)$`)

// parseRateLimit returns the name, r and t of a one-item RateLimit value.
func parseRateLimit(t *testing.T, v string) (name string, r, reset int64) {
	t.Helper()
	m := rateLimitItem.FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("RateLimit %q: not one item \"NAME\";r=R;t=T", v)
	}
	r, _ = strconv.ParseInt(m[2], 10, 64)
	reset, _ = strconv.ParseInt(m[3], 10, 64)
	return m[1], r, reset
}

// ceilSec is d in whole seconds, rounded up.
func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// windowEnd is the end of the epoch-aligned window of length w holding
// at, plus extra whole windows.
func windowEnd(at time.Time, w time.Duration, extra int) time.Time {
	n := at.UnixNano()
	start := n - n%int64(w)
	return time.Unix(0, start+int64(w)*int64(1+extra))
}

// wantRetryAfter fails t unless h has a Retry-After of whole seconds in
// [1, most].
func wantRetryAfter(t *testing.T, what string, h http.Header, most int64) {
	t.Helper()
	v := h.Get("Retry-After")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > most {
		t.Errorf("%s: Retry-After %q, want whole seconds in [1, %d]", what, v, most)
	}
}

// TestHeadersIETF checks RateLimit-Policy and RateLimit on every request
// up to and past the limit, for each window algorithm, with t (draft-11's
// effective window: until one more unit frees up, if the key took what is
// left) computed from the algorithm: a sliding log (its oldest request's
// expiry) and a token bucket (one unit, 6 days) give exact values; the
// windows' depend on the epoch-aligned window the request fell in (the
// sliding window's next unit comes a fifth into the next one), bounded by
// the times before and after it. The 429's Retry-After is t.
func TestHeadersIETF(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit /sliding_log {
		name api
		limit 5 30d
		algorithm sliding_log
	}
	rate_limit /token_bucket {
		name bucket
		limit 5 30d
		algorithm token_bucket
	}
	rate_limit /fixed_window {
		name fixed
		limit 5 30d
		algorithm fixed_window
	}
	rate_limit /sliding_window {
		name sliding
		limit 5 30d
	}
	respond "ok"
}
`)
	const w = thirtyDays * time.Second
	for i, tc := range []struct {
		path, name string
		// reset is the range of t for the k-th request (1-based), sent
		// between before and after.
		reset func(k int, before, after time.Time) (lo, hi int64)
	}{
		{"/sliding_log", "api", func(k int, _, _ time.Time) (int64, int64) {
			return thirtyDays, thirtyDays
		}},
		{"/token_bucket", "bucket", func(k int, _, _ time.Time) (int64, int64) {
			return thirtyDays / 5, thirtyDays / 5
		}},
		{"/fixed_window", "fixed", func(k int, before, after time.Time) (int64, int64) {
			return ceilSec(windowEnd(after, w, 0).Sub(after)), ceilSec(windowEnd(before, w, 0).Sub(before))
		}},
		{"/sliding_window", "sliding", func(k int, before, after time.Time) (int64, int64) {
			return ceilSec(windowEnd(after, w, 0).Sub(after) + w/5), ceilSec(windowEnd(before, w, 0).Sub(before) + w/5)
		}},
	} {
		wantPolicy := fmt.Sprintf(`"%s";q=5;w=%d`, tc.name, thirtyDays)
		for k := 1; k <= 6; k++ {
			what := fmt.Sprintf("Test %d: %s request %d", i, tc.path, k)
			before := time.Now()
			code, h, _ := p.get(t, tc.path)
			after := time.Now()
			wantCode := 200
			if k == 6 {
				wantCode = 429
			}
			if code != wantCode {
				t.Errorf("%s: status %d, want %d", what, code, wantCode)
			}
			if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != wantPolicy {
				t.Errorf("%s: RateLimit-Policy %q, want [%s]", what, got, wantPolicy)
			}
			vals := h.Values("RateLimit")
			if len(vals) != 1 {
				t.Errorf("%s: RateLimit %q, want one value", what, vals)
				continue
			}
			name, r, reset := parseRateLimit(t, vals[0])
			if name != tc.name || r != int64(max(5-k, 0)) {
				t.Errorf("%s: RateLimit %q, want name %q and r=%d", what, vals[0], tc.name, max(5-k, 0))
			}
			if lo, hi := tc.reset(k, before, after); reset < lo || reset > hi {
				t.Errorf("%s: RateLimit %q: t=%d, want %d..%d", what, vals[0], reset, lo, hi)
			}
			if k == 6 {
				if v := h.Get("Retry-After"); v != strconv.FormatInt(reset, 10) {
					t.Errorf("%s: Retry-After %q, want t, %d", what, v, reset)
				}
			} else if v := h.Get("Retry-After"); v != "" {
				t.Errorf("%s: Retry-After %q on an allowed request", what, v)
			}
			for _, legacy := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				if v := h.Get(legacy); v != "" {
					t.Errorf("%s: %s %q with headers ietf (the default)", what, legacy, v)
				}
			}
		}
	}
}

// TestHeadersModes checks headers legacy, both and off.
func TestHeadersModes(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit /legacy {
		name legacy
		limit 5 30d
		algorithm sliding_log
		headers legacy
	}
	rate_limit /both {
		name both
		limit 5 30d
		algorithm sliding_log
		headers both
	}
	rate_limit /off {
		name off
		limit 5 30d
		algorithm sliding_log
		headers off
	}
	rate_limit /ietf {
		name ietf
		limit 5 30d
		algorithm sliding_log
		headers ietf
	}
	respond "ok"
}
`)
	month := strconv.Itoa(thirtyDays)
	for i, tc := range []struct {
		path   string
		ietf   bool
		legacy bool
	}{
		{"/legacy", false, true},
		{"/both", true, true},
		{"/off", false, false},
		{"/ietf", true, false},
	} {
		for k := 1; k <= 6; k++ {
			what := fmt.Sprintf("Test %d: %s request %d", i, tc.path, k)
			code, h, _ := p.get(t, tc.path)
			remaining := max(5-k, 0)
			want := map[string]string{
				"RateLimit-Policy":      "",
				"RateLimit":             "",
				"X-RateLimit-Limit":     "",
				"X-RateLimit-Remaining": "",
				"X-RateLimit-Reset":     "",
			}
			if tc.ietf {
				want["RateLimit-Policy"] = fmt.Sprintf(`"%s";q=5;w=%s`, tc.path[1:], month)
				want["RateLimit"] = fmt.Sprintf(`"%s";r=%d;t=%s`, tc.path[1:], remaining, month)
			}
			if tc.legacy {
				want["X-RateLimit-Limit"] = "5"
				want["X-RateLimit-Remaining"] = strconv.Itoa(remaining)
				want["X-RateLimit-Reset"] = month
			}
			for name, v := range want {
				if got := h.Get(name); got != v {
					t.Errorf("%s: %s %q, want %q", what, name, got, v)
				}
			}
			if k < 6 {
				if code != 200 {
					t.Errorf("%s: status %d, want 200", what, code)
				}
				continue
			}
			if code != 429 {
				t.Errorf("%s: status %d, want 429", what, code)
			}
			// Even with headers off, a denial says when to come back.
			wantRetryAfter(t, what, h, thirtyDays)
		}
	}
}

// TestHeadersSeveralLimits checks that a rule with several limits gives
// one item per limit, named after the rule and the window, and that the
// legacy headers show the limit closest to running out.
func TestHeadersSeveralLimits(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name api
		limit 3 1m
		limit 100 1d
		algorithm sliding_log
		headers both
	}
	respond "ok"
}
`)
	const policy = `"api-1m";q=3;w=60, "api-1d";q=100;w=86400`
	for k := 1; k <= 4; k++ {
		what := fmt.Sprintf("request %d", k)
		code, h, _ := p.get(t, "/")
		if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != policy {
			t.Errorf("%s: RateLimit-Policy %q, want [%s]", what, got, policy)
		}
		if k == 4 {
			if code != 429 {
				t.Errorf("%s: status %d, want 429", what, code)
			}
			// Denied: nothing taken, the minute's quota is spent; the
			// log's reset is its newest event's expiry, under a minute.
			m := regexp.MustCompile(`^"api-1m";r=0;t=(\d+), "api-1d";r=97;t=(\d+)$`).FindStringSubmatch(h.Get("RateLimit"))
			if m == nil || m[1] != "60" && m[1] != "59" || m[2] != "86400" && m[2] != "86399" {
				t.Errorf("%s: RateLimit %q, want \"api-1m\";r=0;t=60, \"api-1d\";r=97;t=86400 (t within a second)", what, h.Get("RateLimit"))
			}
			wantRetryAfter(t, what, h, 60)
			continue
		}
		if code != 200 {
			t.Errorf("%s: status %d, want 200", what, code)
		}
		want := fmt.Sprintf(`"api-1m";r=%d;t=60, "api-1d";r=%d;t=86400`, 3-k, 100-k)
		if got := h.Values("RateLimit"); len(got) != 1 || got[0] != want {
			t.Errorf("%s: RateLimit %q, want [%s]", what, got, want)
		}
		for name, v := range map[string]string{
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": strconv.Itoa(3 - k),
			"X-RateLimit-Reset":     "60",
		} {
			if got := h.Get(name); got != v {
				t.Errorf("%s: %s %q, want %q", what, name, got, v)
			}
		}
	}
}

// TestHeadersSeveralRules checks that each rule that applies adds its own
// RateLimit and RateLimit-Policy field line.
func TestHeadersSeveralRules(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		rule short {
			limit 2 1m
			algorithm sliding_log
		}
		rule long {
			limit 50 1d
			algorithm sliding_log
		}
	}
	respond "ok"
}
`)
	code, h, _ := p.get(t, "/")
	if code != 200 {
		t.Errorf("status %d, want 200", code)
	}
	if got, want := fmt.Sprint(h.Values("RateLimit-Policy")), `["short";q=2;w=60 "long";q=50;w=86400]`; got != want {
		t.Errorf("RateLimit-Policy %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(h.Values("RateLimit")), `["short";r=1;t=60 "long";r=49;t=86400]`; got != want {
		t.Errorf("RateLimit %s, want %s", got, want)
	}
}
