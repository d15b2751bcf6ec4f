package ruleconfig

import (
	"fmt"
	"time"
	_ "time/tzdata" // timezone names load on hosts without zoneinfo

	"github.com/edgebyte/edgelimit/limiter"
)

// DefaultTimezone is the zone of a rule's calendar limits when Timezone
// is empty.
const DefaultTimezone = "UTC"

// Calendar reports whether l counts in calendar periods (Period set)
// rather than a duration's windows.
func (l Limit) Calendar() bool { return l.Period != "" }

// Span is the length the limit is known by outside its windows: its
// Window, or a calendar period's Span (24h for a day; limiter.Period.Span).
func (l Limit) Span() time.Duration {
	if l.Calendar() {
		return limiter.Period(l.Period).Span()
	}
	return time.Duration(l.Window)
}

// Text writes the limit's window as a config does: "1m", "1d" or a
// calendar period, "day".
func (l Limit) Text() string {
	if l.Calendar() {
		return l.Period
	}
	return WindowText(time.Duration(l.Window))
}

// windowString is the limit's window as errors show it: "1m0s" or a
// calendar period, "day".
func (l Limit) windowString() string {
	if l.Calendar() {
		return l.Period
	}
	return time.Duration(l.Window).String()
}

// CheckLimit checks a limit's count and window: a duration or a calendar
// period, not both.
func CheckLimit(l Limit) error {
	if !l.Calendar() {
		return nil // limiter.Config.Validate checks the duration
	}
	if _, err := limiter.ParsePeriod(l.Period); err != nil {
		return fmt.Errorf("limit %d: %v", l.Count, err)
	}
	if l.Window != 0 {
		return fmt.Errorf("limit %d: window %s and period %s: give one", l.Count, WindowText(time.Duration(l.Window)), l.Period)
	}
	return nil
}

// HasCalendar reports whether one of r's limits is a calendar period.
func (r *Rule) HasCalendar() bool {
	for _, l := range r.Limits {
		if l.Calendar() {
			return true
		}
	}
	return false
}

// Location is the time zone of r's calendar limits: Timezone, an IANA
// name (the names are built in), or UTC.
func (r *Rule) Location() (*time.Location, error) {
	return LoadTimezone(r.Timezone)
}

// LoadTimezone is the zone named name ("" is DefaultTimezone), with an
// error fit for a config.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" {
		name = DefaultTimezone
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" { // Local is the host's, not a name every node agrees on
		return nil, fmt.Errorf("timezone %q: not an IANA time zone name (such as UTC, Europe/Berlin or America/New_York)", name)
	}
	return loc, nil
}

// CheckCalendar checks the calendar fields together: every limit's
// period, and a timezone only where a limit is a calendar period.
func (r *Rule) CheckCalendar() error {
	for _, l := range r.Limits {
		if err := CheckLimit(l); err != nil {
			return err
		}
	}
	if r.Timezone == "" {
		return nil
	}
	if _, err := r.Location(); err != nil {
		return err
	}
	if !r.HasCalendar() {
		return fmt.Errorf("timezone applies to calendar limits only (limit <count> day, week, month or year)")
	}
	return nil
}

// AlgorithmInForce is r's algorithm, or its default: sliding_window, or
// fixed_window for a rule with a calendar limit.
func (r *Rule) AlgorithmInForce() string {
	if r.Algorithm != "" {
		return r.Algorithm
	}
	return string(limiter.DefaultAlgorithm(r.periods()))
}

// periods is r's limits' periods for limiter.Config.Periods: nil when
// none is a calendar period.
func (r *Rule) periods() []limiter.Period {
	if !r.HasCalendar() {
		return nil
	}
	out := make([]limiter.Period, len(r.Limits))
	for i, l := range r.Limits {
		out[i] = limiter.Period(l.Period)
	}
	return out
}
