package limiter

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Period names a calendar period: a limit whose windows are the days,
// weeks, months or years of a time zone (Config.Periods, Config.Location)
// rather than durations aligned to the Unix epoch. Such a limit is a fixed
// window whose length is the period's: a day lasts 23 or 25 hours on the
// days a zone's clocks change, a month 28 to 31 days, a year 365 or 366.
// A week begins on Monday at 00:00.
type Period string

// The calendar periods; "" is none (the limit's Window, a duration).
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
	Year  Period = "year"
)

// Periods lists the calendar periods, shortest first.
var Periods = []Period{Day, Week, Month, Year}

// Span is the period's length where clocks do not change: 24h, 7×24h,
// and the longest month and year, 31 and 366 days. A calendar limit's
// Window must be its period's Span: it is the length the rule's
// longest-window uses see (Retry-After of a request that can never pass,
// a burst bucket's refill, a cluster share's rate); the window in force
// is the period's own (Quota.Window). 0 for an unknown period.
func (p Period) Span() time.Duration {
	switch p {
	case Day:
		return 24 * time.Hour
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 31 * 24 * time.Hour
	case Year:
		return 366 * 24 * time.Hour
	}
	return 0
}

// ParsePeriod is the period named s, or an error that lists the names.
func ParsePeriod(s string) (Period, error) {
	if p := Period(s); p.Span() != 0 {
		return p, nil
	}
	return "", fmt.Errorf("unknown calendar period %q (want day, week, month or year)", s)
}

// PeriodAt is the period p that holds t in loc: its start and its end
// (exclusive), as instants. A day starts at the day's first instant,
// 00:00 or, where a clock change skips midnight, the change itself.
func PeriodAt(p Period, loc *time.Location, t time.Time) (start, end time.Time) {
	t = t.In(loc)
	y, m, d := t.Date()
	switch p {
	case Day:
		return dayStart(y, m, d, loc), dayStart(y, m, d+1, loc)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return dayStart(y, m, d-back, loc), dayStart(y, m, d-back+7, loc)
	case Month:
		return dayStart(y, m, 1, loc), dayStart(y, m+1, 1, loc)
	case Year:
		return dayStart(y, 1, 1, loc), dayStart(y+1, 1, 1, loc)
	}
	panic("limiter: unknown period " + string(p))
}

// dayStart is the first instant of day y-m-d in loc (d may be out of the
// month's range, and is normalized as time.Date does). time.Date reads a
// midnight that a clock change skips as an instant of the day before, for
// some zones: the day then starts where that zone ends, at the change.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if ty, tm, td := t.Date(); time.Date(ty, tm, td, 0, 0, 0, 0, time.UTC).Before(want) {
		_, t = t.ZoneBounds()
	}
	return t
}

// calendar is a calendar limit of a plan: its period and zone, and the
// last period computed, shared by every key of the plan (as windowStarts
// is for durations): a decision whose now falls in it takes it instead
// of asking the zone.
type calendar struct {
	period Period
	loc    *time.Location
	last   atomic.Pointer[span]
}

// span is a period's start and end, in ns since the epoch.
type span struct{ start, end int64 }

// at is the start and the length (ns) of the period holding now.
func (c *calendar) at(now int64) (start, length int64) {
	if s := c.last.Load(); s != nil && now >= s.start && now < s.end {
		return s.start, s.end - s.start
	}
	st, en := PeriodAt(c.period, c.loc, time.Unix(0, now))
	s := &span{st.UnixNano(), en.UnixNano()}
	c.last.Store(s)
	return s.start, s.end - s.start
}

// window is the start and length (ns) of the fixed window of limit i that
// holds now: its calendar period, or the epoch-aligned window of its
// duration.
func (p *plan) window(i int, now int64) (start, length int64) {
	lp := &p.limits[i]
	if lp.cal != nil {
		return lp.cal.at(now)
	}
	return p.starts.at(i, now, lp.w), lp.w
}

// fixedAt is window(i, now) for a fixed window whose state holds the
// window starting at a: if time went backwards past a's start (the key
// then stays in its later window), a calendar period's length is that of
// a's period, not now's.
func (p *plan) fixedAt(i int, a uint64, now int64) (start, length int64) {
	start, length = p.window(i, now)
	if c := p.limits[i].cal; c != nil && int64(a) > start {
		st, en := PeriodAt(c.period, c.loc, time.Unix(0, int64(a)))
		return st.UnixNano(), en.Sub(st).Nanoseconds()
	}
	return start, length
}

// windowStart is the start of window(i, now).
func (p *plan) windowStart(i int, now int64) int64 {
	start, _ := p.window(i, now)
	return start
}

// newCalendar is the calendar of a limit of period in loc (nil: UTC).
func newCalendar(period Period, loc *time.Location) *calendar {
	if loc == nil {
		loc = time.UTC
	}
	return &calendar{period: period, loc: loc}
}

// sameCalendar is true if a and b count in the same windows: both
// durations, or one period in one zone.
func sameCalendar(a, b *calendar) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.period == b.period && a.loc.String() == b.loc.String()
}

// DefaultAlgorithm is the algorithm of a rule of these limits that names
// none: FixedWindow if one of periods is a calendar period (a calendar
// limit is a fixed window), else SlidingWindow.
func DefaultAlgorithm(periods []Period) Algorithm {
	for _, p := range periods {
		if p != "" {
			return FixedWindow
		}
	}
	return SlidingWindow
}

// validateCalendar checks c's Periods against its Limits and algorithm.
func (c Config) validateCalendar() error {
	if len(c.Periods) == 0 {
		return nil
	}
	if len(c.Periods) != len(c.Limits) {
		return fmt.Errorf("%d periods for %d limits: one per limit (\"\" for a duration)", len(c.Periods), len(c.Limits))
	}
	for i, p := range c.Periods {
		if p == "" {
			continue
		}
		if _, err := ParsePeriod(string(p)); err != nil {
			return err
		}
		if c.Limits[i].Window != p.Span() {
			return fmt.Errorf("limit %d per %s: its Window must be the period's span, %s", c.Limits[i].Count, p, p.Span())
		}
		if a := c.algorithm(); a != FixedWindow {
			return fmt.Errorf("limit %d per %s: a calendar period is a fixed window; the algorithm must be fixed_window (the default of a rule with a calendar limit), not %s", c.Limits[i].Count, p, a)
		}
	}
	return nil
}
