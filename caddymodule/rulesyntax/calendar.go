package rulesyntax

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// limitWindow reads the window of `limit <count> <window>`: a duration
// ("1m", "1d") or a calendar period (day, week, month, year).
func limitWindow(d *caddyfile.Dispenser, window string) (ruleconfig.Limit, error) {
	if p, err := limiter.ParsePeriod(window); err == nil {
		return ruleconfig.Limit{Period: string(p)}, nil
	}
	w, err := caddy.ParseDuration(window)
	switch {
	case err != nil:
		return ruleconfig.Limit{}, d.Errf("limit window %q: not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year)", window)
	case w < 0:
		return ruleconfig.Limit{}, d.Errf("limit window %s: must not be negative", window)
	case w < limiter.MinWindow || w > limiter.MaxWindow:
		return ruleconfig.Limit{}, d.Errf("limit window %s: must be between %s and %s", window, limiter.MinWindow, limiter.MaxWindow)
	}
	return ruleconfig.Limit{Window: caddy.Duration(w)}, nil
}

// finishCalendar checks a rule's calendar limits with the rest of it: a
// timezone needs a calendar limit, and a calendar limit the fixed_window
// algorithm (errors at the timezone's or the algorithm's line).
func (s *Spec) finishCalendar() error {
	r := &s.Rule
	if r.Timezone != "" && !r.HasCalendar() {
		return ErrAt(s.Set["timezone"], "rule %q: timezone applies to calendar limits only (limit <count> day, week, month or year)", r.Name)
	}
	if r.HasCalendar() && r.AlgorithmInForce() != string(limiter.FixedWindow) {
		return ErrAt(s.Set["algorithm"], "rule %q: a calendar limit (day, week, month, year) is a fixed window: algorithm fixed_window, or none, not %s", r.Name, r.Algorithm)
	}
	return nil
}
