package ruleconfig

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestCalendarJSON: a rule's JSON gives a calendar limit as
// {"count":N,"period":"day"} with a timezone, checked by CheckFields in
// the words of a config error, and made into limiter's Periods and
// Location (the zone loaded from the built-in tzdata).
func TestCalendarJSON(t *testing.T) {
	for i, tc := range []struct {
		json, err string
	}{
		{`{"name":"r","limits":[{"count":3,"period":"day"}]}`, ""},
		{`{"name":"r","limits":[{"count":10,"window":"1m"},{"count":300,"period":"month"}],"timezone":"Asia/Kolkata"}`, ""},
		{`{"name":"r","limits":[{"count":3,"period":"week"}],"algorithm":"fixed_window","timezone":"America/New_York"}`, ""},
		{`{"name":"r","limits":[{"count":5,"period":"fortnight"}]}`, `limit 5: unknown calendar period "fortnight" (want day, week, month or year)`},
		{`{"name":"r","limits":[{"count":5,"period":"day","window":"1d"}]}`, "limit 5: window 1d and period day: give one"},
		{`{"name":"r","limits":[{"count":5,"period":"day"}],"timezone":"Mars/Base"}`, `timezone "Mars/Base": not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York)`},
		{`{"name":"r","limits":[{"count":5,"window":"1d"}],"timezone":"UTC"}`, "timezone applies to calendar limits only (limit <count> day, week, month or year)"},
		{`{"name":"r","limits":[{"count":5,"period":"day"}],"algorithm":"sliding_window"}`, "limit 5 per day: a calendar period is a fixed window; the algorithm must be fixed_window (the default of a rule with a calendar limit), not sliding_window"},
		{`{"name":"r","limits":[{"count":5,"period":"day"},{"count":6,"period":"day"}]}`, "limit 5 day and limit 6 day have the same window: keep the smaller"},
		{`{"name":"r","limits":[{"count":5}]}`, "window 0s: must be between 1ms and 8784h0m0s"},
	} {
		var r Rule
		if err := json.Unmarshal([]byte(tc.json), &r); err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		err := r.CheckFields()
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.err {
				t.Errorf("Test %d: %q, want %q", i, got, tc.err)
			}
		} else if tc.err != "" {
			t.Errorf("Test %d: passed, want %q", i, tc.err)
		}
	}

	r := Rule{Name: "r", Limits: []Limit{{Count: 10, Window: 60e9}, {Count: 3, Period: "day"}}, Timezone: "Europe/Berlin"}
	cfg := r.LimiterConfig()
	if cfg.Limits[1] != (limiter.Limit{Count: 3, Window: 24 * time.Hour}) || len(cfg.Periods) != 2 || cfg.Periods[0] != "" || cfg.Periods[1] != limiter.Day || cfg.Location.String() != "Europe/Berlin" {
		t.Errorf("LimiterConfig: %+v", cfg)
	}
	if r.AlgorithmInForce() != "fixed_window" {
		t.Errorf("AlgorithmInForce: %s", r.AlgorithmInForce())
	}
	if cfg := (&Rule{Limits: []Limit{{Count: 3, Window: 60e9}}}).LimiterConfig(); cfg.Periods != nil || cfg.Location != nil {
		t.Errorf("a rule of durations: %+v", cfg)
	}
}

// TestCalendarTiers: a tier gives a calendar limit as COUNT/PERIOD, and a
// duration of the same length is not the period.
func TestCalendarTiers(t *testing.T) {
	limits := []Limit{{Count: 10, Window: 60e9}, {Count: 100, Period: "day"}}
	f, err := ParseTiers(map[string][]string{"pro": {"100/1m", "1000/day"}}, limits)
	if err != nil || f["pro"] != 10 {
		t.Fatalf("ParseTiers: %v %v", f, err)
	}
	_, err = ParseTiers(map[string][]string{"pro": {"100/1m", "1000/1d"}}, limits)
	if err == nil || err.Error() != "tier pro: 1000/1d: the window must be the rule's, day" {
		t.Errorf("a duration for the period: %v", err)
	}
	_, err = ParseTiers(map[string][]string{"pro": {"100/day", "1000/day"}}, limits)
	if err == nil || err.Error() != "tier pro: 100/day: the window must be the rule's, 1m" {
		t.Errorf("the period for a duration: %v", err)
	}
}
