package caddymodule

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// TestHeadersEffectiveWindow pins, on a fake clock, the RateLimit header
// (r and draft-11's t, the effective window), Retry-After on a denial
// (never before the end of t) and X-RateLimit-Reset (until the quota is
// whole again) of each algorithm at its edges: a window's boundary, a
// burst, a tier and a country's factor (both a scale of the limits).
func TestHeadersEffectiveWindow(t *testing.T) {
	base := time.Unix(1_767_225_600, 0) // a whole number of days since the epoch
	const s = time.Second
	type hstep struct {
		at         time.Duration
		cost       int64
		scale      float64 // 0: 1
		rateLimit  string
		policy     string // RateLimit-Policy, if set
		retryAfter string // "": allowed
		reset      string // X-RateLimit-Reset
	}
	minute := caddy.Duration(time.Minute)
	for i, tc := range []struct {
		name  string
		rule  ruleconfig.Rule
		steps []hstep
	}{{
		name: "sliding_window: t is the next unit as the previous window's weight falls",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 5, Window: minute}}},
		steps: []hstep{
			{at: 50 * s, cost: 1, rateLimit: `"api";r=4;t=22`, reset: "70"},
			{at: 50 * s, cost: 4, rateLimit: `"api";r=0;t=22`, reset: "70"},
			// the next window: prev 5 weighs 5×58/60; one fits at 72s
			{at: 62 * s, cost: 1, rateLimit: `"api";r=0;t=10`, retryAfter: "10", reset: "58"},
			{at: 72 * s, cost: 1, rateLimit: `"api";r=0;t=12`, reset: "108"},
		},
	}, {
		name: "fixed_window: t is the window's end",
		rule: ruleconfig.Rule{Algorithm: "fixed_window", Limits: []ruleconfig.Limit{{Count: 3, Window: minute}}},
		steps: []hstep{
			{at: 59500 * time.Millisecond, cost: 3, rateLimit: `"api";r=0;t=1`, reset: "1"},
			{at: 59500 * time.Millisecond, cost: 1, rateLimit: `"api";r=0;t=1`, retryAfter: "1", reset: "1"},
			{at: 60 * s, cost: 1, rateLimit: `"api";r=2;t=60`, reset: "60"},
		},
	}, {
		name: "sliding_window burst 2: t is the burst bucket's next token",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 6, Window: minute}}, Burst: 2},
		steps: []hstep{
			{at: 0, cost: 1, rateLimit: `"api";r=1;t=10`, reset: "120"},
			{at: 0, cost: 1, rateLimit: `"api";r=0;t=10`, reset: "120"},
			{at: 4 * s, cost: 1, rateLimit: `"api";r=0;t=6`, retryAfter: "6", reset: "116"},
		},
	}, {
		name: "token_bucket burst 2: t is the next token",
		rule: ruleconfig.Rule{Algorithm: "token_bucket", Limits: []ruleconfig.Limit{{Count: 6, Window: minute}}, Burst: 2},
		steps: []hstep{
			{at: 0, cost: 1, rateLimit: `"api";r=1;t=10`, reset: "10"},
			{at: 0, cost: 1, rateLimit: `"api";r=0;t=10`, reset: "20"},
			{at: 4 * s, cost: 1, rateLimit: `"api";r=0;t=6`, retryAfter: "6", reset: "16"},
		},
	}, {
		name: "sliding_log in a tier of 0.2 (2/1m): t is the oldest event's expiry",
		rule: ruleconfig.Rule{Algorithm: "sliding_log", Limits: []ruleconfig.Limit{{Count: 10, Window: minute}}},
		steps: []hstep{
			{at: 0, cost: 1, scale: 0.2, rateLimit: `"api";r=1;t=60`, policy: `"api";q=2;w=60`, reset: "60"},
			{at: 30 * s, cost: 1, scale: 0.2, rateLimit: `"api";r=0;t=30`, policy: `"api";q=2;w=60`, reset: "60"},
			{at: 45 * s, cost: 1, scale: 0.2, rateLimit: `"api";r=0;t=15`, policy: `"api";q=2;w=60`, retryAfter: "15", reset: "45"},
		},
	}, {
		name: "leaky_bucket at a country's 0.5 (5/10s): t is the queue's next place",
		rule: ruleconfig.Rule{Algorithm: "leaky_bucket", Limits: []ruleconfig.Limit{{Count: 10, Window: caddy.Duration(10 * s)}}},
		steps: []hstep{
			// a unit is 2s; max_delay 1s holds at most 1s of queue
			{at: 0, cost: 1, scale: 0.5, rateLimit: `"api";r=0;t=1`, policy: `"api";q=5;w=10`, reset: "2"},
			{at: 0, cost: 1, scale: 0.5, rateLimit: `"api";r=0;t=1`, policy: `"api";q=5;w=10`, retryAfter: "1", reset: "2"},
			{at: 1500 * time.Millisecond, cost: 1, scale: 0.5, rateLimit: `"api";r=0;t=2`, policy: `"api";q=5;w=10`, reset: "3"},
		},
	}, {
		name: "two limits: a t per item; Retry-After the denying limit's",
		rule: ruleconfig.Rule{Algorithm: "fixed_window", Limits: []ruleconfig.Limit{{Count: 2, Window: caddy.Duration(s)}, {Count: 5, Window: minute}}},
		steps: []hstep{
			{at: 500 * time.Millisecond, cost: 2, rateLimit: `"api-1s";r=0;t=1, "api-1m";r=3;t=60`, reset: "1"},
			{at: 900 * time.Millisecond, cost: 1, rateLimit: `"api-1s";r=0;t=1, "api-1m";r=3;t=60`, retryAfter: "1", reset: "1"},
			{at: 2 * s, cost: 2, rateLimit: `"api-1s";r=0;t=1, "api-1m";r=1;t=58`, reset: "1"},
			{at: 3 * s, cost: 1, rateLimit: `"api-1s";r=1;t=1, "api-1m";r=0;t=57`, reset: "57"},
			{at: 3 * s, cost: 1, rateLimit: `"api-1s";r=1;t=1, "api-1m";r=0;t=57`, retryAfter: "57", reset: "57"},
		},
	}} {
		ru := headersRule(t, i, tc.rule)
		for j, st := range tc.steps {
			scale := st.scale
			if scale == 0 {
				scale = 1
			}
			h, retry := decideHeaders(ru, base.Add(st.at), st.cost, scale)
			if got := h.Get("RateLimit"); got != st.rateLimit {
				t.Errorf("Test %d (%s) step %d: RateLimit %q, want %q", i, tc.name, j, got, st.rateLimit)
			}
			if got := h.Get("RateLimit-Policy"); st.policy != "" && got != st.policy {
				t.Errorf("Test %d (%s) step %d: RateLimit-Policy %q, want %q", i, tc.name, j, got, st.policy)
			}
			if retry != st.retryAfter {
				t.Errorf("Test %d (%s) step %d: Retry-After %q, want %q", i, tc.name, j, retry, st.retryAfter)
			}
			if got := h.Get("X-RateLimit-Reset"); got != st.reset {
				t.Errorf("Test %d (%s) step %d: X-RateLimit-Reset %q, want %q", i, tc.name, j, got, st.reset)
			}
		}
	}
}

// headersRule is test i's rule r, named api with both headers, checked
// and provisioned with its limiter.
func headersRule(t *testing.T, i int, r ruleconfig.Rule) *rule {
	t.Helper()
	r.Name, r.Headers = "api", ruleconfig.HeadersBoth
	if err := r.CheckFields(); err != nil {
		t.Fatalf("Test %d: %v", i, err)
	}
	ru, err := newRule(r)
	if err != nil {
		t.Fatalf("Test %d: %v", i, err)
	}
	if ru.lim, err = limiter.New(ru.LimiterConfig()); err != nil {
		t.Fatalf("Test %d: %v", i, err)
	}
	return ru
}

// decideHeaders decides a request of cost on key "k" of ru at now, and
// returns the headers it sets and its Retry-After ("" when allowed).
func decideHeaders(ru *rule, now time.Time, cost int64, scale float64) (http.Header, string) {
	d, _ := ru.decide(nil, "k", now, cost, scale)
	h := http.Header{}
	ru.setHeaders(h, &d)
	retry := ""
	if !d.Allowed {
		retry = strconv.FormatInt(max(1, ceilSeconds(denialWait(&d, cost))), 10)
	}
	return h, retry
}

// TestHeadersCalendar pins the headers of calendar limits on a fake clock
// at their rollovers: t, Retry-After and X-RateLimit-Reset run to the
// period's end, and RateLimit-Policy's w is the length of the period in
// force: 86400 for a day, 82800 and 90000 on the days Berlin's clocks
// change, 2505600 (29 days) for February 2028.
func TestHeadersCalendar(t *testing.T) {
	type hstep struct {
		at                                   string // RFC 3339
		cost                                 int64
		rateLimit, policy, retryAfter, reset string
	}
	for i, tc := range []struct {
		name  string
		rule  ruleconfig.Rule
		steps []hstep
	}{{
		name: "limit 2 day, UTC",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 2, Period: "day"}}},
		steps: []hstep{
			{"2026-03-10T23:59:00Z", 2, `"api";r=0;t=60`, `"api";q=2;w=86400`, "", "60"},
			{"2026-03-10T23:59:59.5Z", 1, `"api";r=0;t=1`, `"api";q=2;w=86400`, "1", "1"},
			{"2026-03-11T00:00:00Z", 1, `"api";r=1;t=86400`, `"api";q=2;w=86400`, "", "86400"},
		},
	}, {
		name: "limit 1 day, Europe/Berlin: the days of 23 and 25 hours",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 1, Period: "day"}}, Timezone: "Europe/Berlin"},
		steps: []hstep{
			{"2026-03-28T23:59:59+01:00", 1, `"api";r=0;t=1`, `"api";q=1;w=86400`, "", "1"},
			{"2026-03-29T00:00:00+01:00", 1, `"api";r=0;t=82800`, `"api";q=1;w=82800`, "", "82800"},
			{"2026-03-29T12:00:00+02:00", 1, `"api";r=0;t=43200`, `"api";q=1;w=82800`, "43200", "43200"},
			{"2026-10-25T00:00:00+02:00", 1, `"api";r=0;t=90000`, `"api";q=1;w=90000`, "", "90000"},
			{"2026-10-25T23:00:00+01:00", 1, `"api";r=0;t=3600`, `"api";q=1;w=90000`, "3600", "3600"},
		},
	}, {
		name: "limit 10 1m + limit 3 month: February 2028, then March",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 10, Window: caddy.Duration(time.Minute)}, {Count: 3, Period: "month"}}},
		steps: []hstep{
			{"2028-02-29T23:59:30Z", 3, `"api-1m";r=7;t=30, "api-month";r=0;t=30`, `"api-1m";q=10;w=60, "api-month";q=3;w=2505600`, "", "30"},
			{"2028-02-29T23:59:45Z", 1, `"api-1m";r=7;t=15, "api-month";r=0;t=15`, `"api-1m";q=10;w=60, "api-month";q=3;w=2505600`, "15", "15"},
			{"2028-03-01T00:00:00Z", 1, `"api-1m";r=9;t=60, "api-month";r=2;t=2678400`, `"api-1m";q=10;w=60, "api-month";q=3;w=2678400`, "", "2678400"},
		},
	}, {
		name: "limit 2 week: Monday 00:00",
		rule: ruleconfig.Rule{Limits: []ruleconfig.Limit{{Count: 2, Period: "week"}}, Headers: ruleconfig.HeadersBoth},
		steps: []hstep{
			{"2026-03-15T23:00:00Z", 2, `"api";r=0;t=3600`, `"api";q=2;w=604800`, "", "3600"},
			{"2026-03-16T00:00:00Z", 1, `"api";r=1;t=604800`, `"api";q=2;w=604800`, "", "604800"},
		},
	}} {
		ru := headersRule(t, i, tc.rule)
		for j, st := range tc.steps {
			now, err := time.Parse(time.RFC3339Nano, st.at)
			if err != nil {
				t.Fatal(err)
			}
			h, retry := decideHeaders(ru, now, st.cost, 1)
			for _, c := range []struct{ name, got, want string }{
				{"RateLimit", h.Get("RateLimit"), st.rateLimit},
				{"RateLimit-Policy", h.Get("RateLimit-Policy"), st.policy},
				{"Retry-After", retry, st.retryAfter},
				{"X-RateLimit-Reset", h.Get("X-RateLimit-Reset"), st.reset},
			} {
				if c.got != c.want {
					t.Errorf("Test %d (%s) step %d: %s %q, want %q", i, tc.name, j, c.name, c.got, c.want)
				}
			}
		}
	}
}
