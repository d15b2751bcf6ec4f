package limiter

import (
	"strings"
	"testing"
	"time"
)

// cstep is one row of a calendar table: at a local time of the table's
// zone ("2026-03-29 01:59:59"; an RFC 3339 time with its offset where the
// local one is ambiguous), the key asks for cost units, and the decision
// must be exactly this: Quotas[0]'s Remaining, Window (the period's
// length) and Reset (= Effective: the period's end), and RetryAfter.
type cstep struct {
	at     string
	cost   int64
	ok     bool
	rem    int64
	window time.Duration
	reset  time.Duration
	retry  time.Duration
}

// zone loads an IANA zone or fails the test.
func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// at reads a row's time in loc.
func at(t testing.TB, loc *time.Location, s string) time.Time {
	t.Helper()
	if strings.ContainsAny(s, "TZ") {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v, err := time.ParseInLocation("2006-01-02 15:04:05.999999999", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// runCalendar plays steps on l, a limiter of calendar limits in loc.
func runCalendar(t *testing.T, l *Limiter, loc *time.Location, steps []cstep) {
	t.Helper()
	for i, s := range steps {
		d := l.AllowAt("k", at(t, loc, s.at), s.cost)
		q := d.Quotas[0]
		if d.Allowed != s.ok || d.RetryAfter != s.retry || q.Remaining != s.rem || q.Window != s.window || q.Reset != s.reset || q.Effective != s.reset {
			t.Errorf("step %d: at %s cost %d: allowed %v retry %v remaining %d window %v reset %v effective %v; want %v %v %d %v %v %v",
				i, s.at, s.cost, d.Allowed, d.RetryAfter, q.Remaining, q.Window, q.Reset, q.Effective, s.ok, s.retry, s.rem, s.window, s.reset, s.reset)
		}
	}
}

// calendarLimiter is a limiter of one calendar limit of n per period in
// loc, the algorithm left to its default.
func calendarLimiter(t testing.TB, n int64, p Period, loc *time.Location) *Limiter {
	t.Helper()
	return mustNew(t, Config{Limits: []Limit{{n, p.Span()}}, Periods: []Period{p}, Location: loc})
}

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

func TestCalendarDayUTC(t *testing.T) {
	l := calendarLimiter(t, 3, Day, nil)
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2026-03-10 12:00:00", cost: 1, ok: true, rem: 2, window: day, reset: 12 * hour},
		{at: "2026-03-10 18:00:00", cost: 1, ok: true, rem: 1, window: day, reset: 6 * hour},
		{at: "2026-03-10 23:59:59", cost: 1, ok: true, rem: 0, window: day, reset: s1},
		{at: "2026-03-10 23:59:59.999999999", cost: 1, ok: false, rem: 0, window: day, reset: ns, retry: ns},
		// midnight: a whole new day
		{at: "2026-03-11 00:00:00", cost: 3, ok: true, rem: 0, window: day, reset: day},
		{at: "2026-03-11 00:00:01", cost: 1, ok: false, rem: 0, window: day, reset: day - s1, retry: day - s1},
		// more than the limit can never pass: RetryAfter is the span
		{at: "2026-03-11 06:00:00", cost: 4, ok: false, rem: 0, window: day, reset: 18 * hour, retry: day},
		// time going backwards stays in the later day
		{at: "2026-03-10 23:00:00", cost: 1, ok: false, rem: 0, window: day, reset: 25 * hour, retry: 25 * hour},
		// a day skipped
		{at: "2026-03-13 20:00:00", cost: 1, ok: true, rem: 2, window: day, reset: 4 * hour},
	})
}

// On the days the clocks change a day lasts 23 or 25 hours, and the
// window and the reset say so.
func TestCalendarDayDST(t *testing.T) {
	for _, tc := range []struct {
		zone  string
		steps []cstep
	}{
		{"Europe/Berlin", []cstep{ // 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET
			{at: "2026-03-28 23:59:59", cost: 2, ok: true, rem: 0, window: day, reset: s1},
			{at: "2026-03-29 00:00:00", cost: 1, ok: true, rem: 1, window: 23 * hour, reset: 23 * hour},
			{at: "2026-03-29 01:59:59", cost: 1, ok: true, rem: 0, window: 23 * hour, reset: 21*hour + s1},
			{at: "2026-03-29 03:00:00", cost: 1, ok: false, rem: 0, window: 23 * hour, reset: 21 * hour, retry: 21 * hour},
			{at: "2026-03-29 23:59:59", cost: 1, ok: false, rem: 0, window: 23 * hour, reset: s1, retry: s1},
			{at: "2026-03-30 00:00:00", cost: 1, ok: true, rem: 1, window: day, reset: day},
			{at: "2026-10-25 00:00:00", cost: 1, ok: true, rem: 1, window: 25 * hour, reset: 25 * hour},
			{at: "2026-10-25T02:30:00+02:00", cost: 1, ok: true, rem: 0, window: 25 * hour, reset: 22*hour + 30*time.Minute},
			{at: "2026-10-25T02:30:00+01:00", cost: 1, ok: false, rem: 0, window: 25 * hour, reset: 21*hour + 30*time.Minute, retry: 21*hour + 30*time.Minute},
			{at: "2026-10-26 00:00:00", cost: 1, ok: true, rem: 1, window: day, reset: day},
		}},
		{"America/New_York", []cstep{ // 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST
			{at: "2026-03-08 00:00:00", cost: 2, ok: true, rem: 0, window: 23 * hour, reset: 23 * hour},
			{at: "2026-03-08 12:00:00", cost: 1, ok: false, rem: 0, window: 23 * hour, reset: 12 * hour, retry: 12 * hour},
			{at: "2026-03-09 00:00:00", cost: 1, ok: true, rem: 1, window: day, reset: day},
			{at: "2026-11-01T01:30:00-04:00", cost: 1, ok: true, rem: 1, window: 25 * hour, reset: 23*hour + 30*time.Minute},
			{at: "2026-11-01T01:30:00-05:00", cost: 1, ok: true, rem: 0, window: 25 * hour, reset: 22*hour + 30*time.Minute},
			{at: "2026-11-01 23:59:59", cost: 1, ok: false, rem: 0, window: 25 * hour, reset: s1, retry: s1},
			{at: "2026-11-02 00:00:00", cost: 1, ok: true, rem: 1, window: day, reset: day},
		}},
		{"America/Havana", []cstep{ // 2026-03-08 00:00 CST → 01:00 CDT: the day starts at 01:00
			{at: "2026-03-07 23:59:59", cost: 2, ok: true, rem: 0, window: day, reset: s1},
			{at: "2026-03-08 01:00:00", cost: 1, ok: true, rem: 1, window: 23 * hour, reset: 23 * hour},
			{at: "2026-03-08 23:00:00", cost: 1, ok: true, rem: 0, window: 23 * hour, reset: hour},
			{at: "2026-03-09 00:00:00", cost: 1, ok: true, rem: 1, window: day, reset: day},
		}},
	} {
		t.Run(tc.zone, func(t *testing.T) {
			loc := zone(t, tc.zone)
			runCalendar(t, calendarLimiter(t, 2, Day, loc), loc, tc.steps)
		})
	}
}

// Month ends and leap days: days roll over at Jan 31 → Feb 1 and
// Feb 28 → Feb 29 → Mar 1 of 2028; months last 31, 29 (2028) and 28 days.
func TestCalendarMonthEnds(t *testing.T) {
	l := calendarLimiter(t, 1, Day, nil)
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2028-01-31 23:59:59", cost: 1, ok: true, rem: 0, window: day, reset: s1},
		{at: "2028-02-01 00:00:00", cost: 1, ok: true, rem: 0, window: day, reset: day},
		{at: "2028-02-28 12:00:00", cost: 1, ok: true, rem: 0, window: day, reset: 12 * hour},
		{at: "2028-02-28 23:59:59", cost: 1, ok: false, rem: 0, window: day, reset: s1, retry: s1},
		{at: "2028-02-29 00:00:00", cost: 1, ok: true, rem: 0, window: day, reset: day},
		{at: "2028-02-29 23:59:59", cost: 1, ok: false, rem: 0, window: day, reset: s1, retry: s1},
		{at: "2028-03-01 00:00:00", cost: 1, ok: true, rem: 0, window: day, reset: day},
	})
	l = calendarLimiter(t, 2, Month, nil)
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2028-01-01 00:00:00", cost: 1, ok: true, rem: 1, window: 31 * day, reset: 31 * day},
		{at: "2028-01-31 23:59:59", cost: 1, ok: true, rem: 0, window: 31 * day, reset: s1},
		{at: "2028-02-01 00:00:00", cost: 2, ok: true, rem: 0, window: 29 * day, reset: 29 * day},
		{at: "2028-02-29 00:00:00", cost: 1, ok: false, rem: 0, window: 29 * day, reset: day, retry: day},
		{at: "2028-03-01 00:00:00", cost: 1, ok: true, rem: 1, window: 31 * day, reset: 31 * day},
		// time going backwards stays in the later month, March's 31 days
		{at: "2028-02-15 00:00:00", cost: 1, ok: true, rem: 0, window: 31 * day, reset: 46 * day},
		{at: "2028-02-16 00:00:00", cost: 1, ok: false, rem: 0, window: 31 * day, reset: 45 * day, retry: 45 * day},
	})
	runCalendar(t, calendarLimiter(t, 2, Month, nil), time.UTC, []cstep{
		{at: "2027-02-10 00:00:00", cost: 1, ok: true, rem: 1, window: 28 * day, reset: 19 * day},
		{at: "2027-04-30 00:00:00", cost: 2, ok: true, rem: 0, window: 30 * day, reset: day},
	})
	// a month in Berlin holds its clock change: March 2026 lasts 31 days less an hour
	berlin := zone(t, "Europe/Berlin")
	runCalendar(t, calendarLimiter(t, 1, Month, berlin), berlin, []cstep{
		{at: "2026-03-01 00:00:00", cost: 1, ok: true, rem: 0, window: 31*day - hour, reset: 31*day - hour},
		{at: "2026-04-01 00:00:00", cost: 1, ok: true, rem: 0, window: 30 * day, reset: 30 * day},
	})
}

// Weeks begin on Monday at 00:00; years on January 1st, 2028 lasting 366
// days.
func TestCalendarWeekYear(t *testing.T) {
	l := calendarLimiter(t, 2, Week, nil)
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2026-03-08 23:59:59", cost: 2, ok: true, rem: 0, window: 7 * day, reset: s1},      // a Sunday
		{at: "2026-03-09 00:00:00", cost: 1, ok: true, rem: 1, window: 7 * day, reset: 7 * day}, // Monday
		{at: "2026-03-11 12:00:00", cost: 1, ok: true, rem: 0, window: 7 * day, reset: 4*day + 12*hour},
		{at: "2026-03-15 23:59:59", cost: 1, ok: false, rem: 0, window: 7 * day, reset: s1, retry: s1},
		{at: "2026-03-16 00:00:00", cost: 1, ok: true, rem: 1, window: 7 * day, reset: 7 * day},
		// a week across a year's end: Monday 2027-12-27 to Monday 2028-01-03
		{at: "2028-01-01 00:00:00", cost: 1, ok: true, rem: 1, window: 7 * day, reset: 2 * day},
	})
	ny := zone(t, "America/New_York")
	runCalendar(t, calendarLimiter(t, 1, Week, ny), ny, []cstep{ // the week of the change to EDT
		{at: "2026-03-04 09:00:00", cost: 1, ok: true, rem: 0, window: 7*day - hour, reset: 4*day + 14*hour},
	})
	l = calendarLimiter(t, 1, Year, nil)
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2027-12-31 23:59:59", cost: 1, ok: true, rem: 0, window: 365 * day, reset: s1},
		{at: "2028-01-01 00:00:00", cost: 1, ok: true, rem: 0, window: 366 * day, reset: 366 * day},
		{at: "2028-12-31 00:00:00", cost: 1, ok: false, rem: 0, window: 366 * day, reset: day, retry: day},
		{at: "2029-01-01 00:00:00", cost: 1, ok: true, rem: 0, window: 365 * day, reset: 365 * day},
	})
}

// A calendar limit beside a duration: all or nothing (a request the day
// denies takes nothing of the minute), each limit its own window.
func TestCalendarWithDuration(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{2, time.Minute}, {3, Day.Span()}}, Periods: []Period{"", Day}})
	runCalendar(t, l, time.UTC, []cstep{
		{at: "2026-03-10 23:58:00", cost: 2, ok: true, rem: 0, window: time.Minute, reset: time.Minute},
		{at: "2026-03-10 23:59:00", cost: 1, ok: true, rem: 1, window: time.Minute, reset: time.Minute},
		// the day is spent: the minute keeps its unit, RetryAfter is midnight
		{at: "2026-03-10 23:59:30", cost: 1, ok: false, rem: 1, window: time.Minute, reset: 30 * s1, retry: 30 * s1},
		{at: "2026-03-11 00:00:00", cost: 2, ok: true, rem: 0, window: time.Minute, reset: time.Minute},
	})
	d := l.AllowAt("k", at(t, time.UTC, "2026-03-11 00:01:00"), 1)
	if q := d.Quotas[1]; !d.Allowed || q.Remaining != 0 || q.Window != day || q.Reset != day-time.Minute {
		t.Errorf("the day's quota: %+v allowed %v", q, d.Allowed)
	}
}

// A refund gives back units of the period in force only; a reset forgets
// them; the key is idle once its period is over.
func TestCalendarRefund(t *testing.T) {
	l := calendarLimiter(t, 2, Day, nil)
	t0 := at(t, time.UTC, "2026-03-10 23:00:00")
	l.AllowAt("k", t0, 2)
	l.Refund("k", Taken{At: t0, Cost: 1, Scale: 1}, t0)
	if d := l.AllowAt("k", t0.Add(time.Minute), 1); !d.Allowed || d.Quotas[0].Remaining != 0 {
		t.Fatalf("after a refund in the day: %+v", d)
	}
	l.AllowAt("k", t0.Add(2*time.Hour), 1)                               // the next day's first unit
	l.Refund("k", Taken{At: t0, Cost: 1, Scale: 1}, t0.Add(2*time.Hour)) // units of the day before: nothing comes back
	if d := l.PeekAt("k", t0.Add(2*time.Hour), 0); d.Quotas[0].Remaining != 1 {
		t.Fatalf("the next day after a refund of the day before: remaining %d, want 1", d.Quotas[0].Remaining)
	}
	l.Refund("k", Taken{At: t0.Add(2 * time.Hour), Cost: 1, Scale: 1}, t0.Add(2*time.Hour))
	if d := l.PeekAt("k", t0.Add(2*time.Hour), 0); d.Quotas[0].Remaining != 2 {
		t.Fatalf("the next day: remaining %d, want 2", d.Quotas[0].Remaining)
	}
	p := l.plan.Load()
	words := []uint64{0, uint64(t0.Add(-23 * time.Hour).UnixNano()), 2}
	if p.idle(words, nil, t0.UnixNano()) {
		t.Errorf("a key with units in the day in force is idle")
	}
	if !p.idle(words, nil, t0.Add(time.Hour).UnixNano()) {
		t.Errorf("a key whose day is over is not idle")
	}
}

// A rule's limits move to another zone or from "1d" to "day" without
// carrying the old windows' counts, which count other windows.
func TestCalendarReconfigure(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{2, Day.Span()}}})
	t0 := at(t, time.UTC, "2026-03-10 23:30:00") // 00:30 in Berlin, the 11th
	l.AllowAt("k", t0, 2)
	for _, cfg := range []Config{
		{Limits: []Limit{{2, Day.Span()}}, Periods: []Period{Day}},                   // UTC: the same day as 1d
		{Limits: []Limit{{2, Day.Span()}}, Periods: []Period{Day}, Location: berlin}, // another day
	} {
		if ok, err := l.Reconfigure(cfg); !ok || err != nil {
			t.Fatalf("Reconfigure: %v %v", ok, err)
		}
	}
	if d := l.AllowAt("k", t0, 1); !d.Allowed || d.Quotas[0].Remaining != 1 || d.Quotas[0].Reset != 23*hour+30*time.Minute {
		t.Errorf("in Berlin's day: %+v", d)
	}
}

func TestPeriodAt(t *testing.T) {
	for _, tc := range []struct {
		period     Period
		zone, at   string
		start, end string // RFC 3339
	}{
		{Day, "UTC", "2028-02-29 13:00:00", "2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z"},
		{Day, "Europe/Berlin", "2026-03-29 12:00:00", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"},
		{Day, "America/Havana", "2026-03-08 12:00:00", "2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00"},
		{Day, "Asia/Beirut", "2026-03-29 12:00:00", "2026-03-29T01:00:00+03:00", "2026-03-30T00:00:00+03:00"},
		{Week, "UTC", "2026-03-09 00:00:00", "2026-03-09T00:00:00Z", "2026-03-16T00:00:00Z"},
		{Week, "UTC", "2026-03-15 23:59:59", "2026-03-09T00:00:00Z", "2026-03-16T00:00:00Z"},
		{Week, "Australia/Sydney", "2026-04-05 12:00:00", "2026-03-30T00:00:00+11:00", "2026-04-06T00:00:00+10:00"},
		{Month, "UTC", "2028-02-15 00:00:00", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{Month, "America/New_York", "2026-12-31 23:00:00", "2026-12-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00"},
		{Year, "Asia/Tokyo", "2027-01-01 00:00:00", "2027-01-01T00:00:00+09:00", "2028-01-01T00:00:00+09:00"},
	} {
		loc := zone(t, tc.zone)
		start, end := PeriodAt(tc.period, loc, at(t, loc, tc.at))
		if !start.Equal(at(t, loc, tc.start)) || !end.Equal(at(t, loc, tc.end)) {
			t.Errorf("%s in %s at %s: %v to %v, want %s to %s", tc.period, tc.zone, tc.at, start, end, tc.start, tc.end)
		}
	}
}

func TestCalendarValidate(t *testing.T) {
	day := []Limit{{3, Day.Span()}}
	for i, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Limits: day, Periods: []Period{"fortnight"}}, `unknown calendar period "fortnight" (want day, week, month or year)`},
		{Config{Limits: day, Periods: []Period{Day, Day}}, `2 periods for 1 limits: one per limit ("" for a duration)`},
		{Config{Limits: []Limit{{3, time.Hour}}, Periods: []Period{Day}}, "limit 3 per day: its Window must be the period's span, 24h0m0s"},
		{Config{Algorithm: SlidingWindow, Limits: day, Periods: []Period{Day}}, "limit 3 per day: a calendar period is a fixed window; the algorithm must be fixed_window (the default of a rule with a calendar limit), not sliding_window"},
		{Config{Algorithm: TokenBucket, Limits: day, Periods: []Period{Day}}, "limit 3 per day: a calendar period is a fixed window; the algorithm must be fixed_window (the default of a rule with a calendar limit), not token_bucket"},
	} {
		if err := tc.cfg.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: %v, want %s", i, err, tc.want)
		}
	}
	if a := (Config{Limits: day, Periods: []Period{Day}}).algorithm(); a != FixedWindow {
		t.Errorf("default algorithm with a calendar limit: %s", a)
	}
	if a := (Config{Limits: day, Periods: []Period{""}}).algorithm(); a != SlidingWindow {
		t.Errorf("default algorithm without one: %s", a)
	}
}

// A hot key under a calendar day against the same under 1d: the period is
// computed once a day per limit (calendar.at), not per decision.
func BenchmarkHotKeyCalendar(b *testing.B) {
	berlin := zone(b, "Europe/Berlin")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"1d", Config{Algorithm: FixedWindow, Limits: []Limit{{1e9, Day.Span()}}}},
		{"day", Config{Limits: []Limit{{1e9, Day.Span()}}, Periods: []Period{Day}}},
		{"day_Berlin", Config{Limits: []Limit{{1e9, Day.Span()}}, Periods: []Period{Day}, Location: berlin}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := mustNew(b, tc.cfg)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if !l.AllowAt("hot", base.Add(time.Duration(i)), 1).Allowed {
					b.Fatal("denied")
				}
			}
		})
	}
}

// PeriodAt's cost: what a decision pays at a period's first request.
func BenchmarkPeriodAt(b *testing.B) {
	berlin := zone(b, "Europe/Berlin")
	for _, p := range Periods {
		b.Run(string(p), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				PeriodAt(p, berlin, base.Add(time.Duration(i)*time.Hour))
			}
		})
	}
}
