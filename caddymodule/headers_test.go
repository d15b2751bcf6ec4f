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
		tc.rule.Name, tc.rule.Headers = "api", ruleconfig.HeadersBoth
		ru, err := newRule(tc.rule)
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		if ru.lim, err = limiter.New(ru.LimiterConfig()); err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		for j, st := range tc.steps {
			scale := st.scale
			if scale == 0 {
				scale = 1
			}
			d, _ := ru.decide(nil, "k", base.Add(st.at), st.cost, scale)
			h := http.Header{}
			ru.setHeaders(h, &d)
			retry := ""
			if !d.Allowed {
				retry = strconv.FormatInt(max(1, ceilSeconds(denialWait(&d, st.cost))), 10)
			}
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
