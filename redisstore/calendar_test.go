package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// TestCalendarMatchesLimiter: calendar limits in Redis decide as the
// in-process limiter does, to the microsecond, on a fake clock (the
// Store's, which the script then reads too) stepped across midnight in UTC
// and across the days Berlin's clocks change, month ends and Feb 29:
// admissions, remaining units, RetryAfter, Reset, the window in force
// (Quota.Window: 23 or 25 hours on the change days) and the effective
// window.
func TestCalendarMatchesLimiter(t *testing.T) {
	_, c := start(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		at   string // RFC 3339
		cost int64
	}
	for i, tc := range []struct {
		periods []limiter.Period
		limits  []limiter.Limit
		loc     *time.Location
		burst   int64
		reqs    []req
	}{
		{[]limiter.Period{limiter.Day}, []limiter.Limit{{Count: 3, Window: limiter.Day.Span()}}, nil, 0, []req{
			{"2026-03-10T23:59:58Z", 1}, {"2026-03-10T23:59:58Z", 2}, {"2026-03-10T23:59:59Z", 1},
			{"2026-03-11T00:00:00Z", 2}, {"2026-03-11T00:00:01Z", 2}, {"2026-03-11T12:00:00Z", 4},
			{"2026-03-10T23:00:00Z", 1}, // backwards: the later day
		}},
		{[]limiter.Period{limiter.Day}, []limiter.Limit{{Count: 2, Window: limiter.Day.Span()}}, berlin, 0, []req{
			{"2026-03-28T23:00:00Z", 1}, // 00:00 of the 23-hour day
			{"2026-03-29T01:30:00+01:00", 1}, {"2026-03-29T03:30:00+02:00", 1}, {"2026-03-29T23:59:59+02:00", 1},
			{"2026-03-30T00:00:00+02:00", 1},
			{"2026-10-25T02:30:00+02:00", 2}, {"2026-10-25T02:30:00+01:00", 1}, {"2026-10-26T00:00:00+01:00", 1},
		}},
		{[]limiter.Period{"", limiter.Month}, []limiter.Limit{{Count: 2, Window: time.Hour}, {Count: 3, Window: limiter.Month.Span()}}, nil, 0, []req{
			{"2028-01-31T23:00:00Z", 2}, {"2028-01-31T23:30:00Z", 1}, {"2028-01-31T23:59:59Z", 1},
			{"2028-02-01T00:00:00Z", 2}, {"2028-02-29T12:00:00Z", 1}, {"2028-02-29T13:00:00Z", 1},
			{"2028-03-01T00:00:00Z", 1},
		}},
		{[]limiter.Period{limiter.Week}, []limiter.Limit{{Count: 5, Window: limiter.Week.Span()}}, nil, 2, []req{
			{"2026-03-15T23:59:58Z", 2}, {"2026-03-15T23:59:59Z", 1}, {"2026-03-16T00:00:00Z", 2}, {"2026-03-16T00:00:00Z", 1},
		}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			cfg := Config{Limits: tc.limits, Periods: tc.periods, Location: tc.loc, Burst: tc.burst}
			s := newStore(t, c, cfg)
			var now time.Time
			s.clock = func() time.Time { return now }
			l, err := limiter.New(limiter.Config{Limits: tc.limits, Periods: tc.periods, Location: tc.loc, Burst: tc.burst})
			if err != nil {
				t.Fatal(err)
			}
			for j, r := range tc.reqs {
				if now, err = time.Parse(time.RFC3339, r.at); err != nil {
					t.Fatal(err)
				}
				want := l.AllowAt("k", now, r.cost)
				got := allow(t, s, "k", r.cost)
				if got.Allowed != want.Allowed || got.RetryAfter != want.RetryAfter || got.Len != want.Len {
					t.Fatalf("Test %d (%s cost %d): allowed %v retry %s, want %v %s", j, r.at, r.cost, got.Allowed, got.RetryAfter, want.Allowed, want.RetryAfter)
				}
				sameEffective(t, fmt.Sprintf("Test %d", j), Config{Algorithm: limiter.FixedWindow, Burst: tc.burst}, got, want)
				for k := range got.Len {
					g, w := got.Quotas[k], want.Quotas[k]
					if tc.burst > 0 { // effective windows within a second (sameEffective)
						g.Effective = w.Effective
					}
					if g != w {
						t.Fatalf("Test %d (%s cost %d): limit %d: %+v, want %+v", j, r.at, r.cost, k, g, w)
					}
				}
			}
		})
	}
}

// TestCalendarSkew: the script counts in the period that holds Redis's
// clock, from the periods around the Store's: a Store whose clock is
// behind Redis's across midnight still counts in Redis's new day.
func TestCalendarSkew(t *testing.T) {
	cfg := Config{Limits: []limiter.Limit{{Count: 1, Window: limiter.Day.Span()}}, Periods: []limiter.Period{limiter.Day}}
	store := time.Date(2026, 3, 10, 23, 59, 59, 0, time.UTC)
	args := newPeriods(cfg).withPeriods(cfg.args(1), store)
	day := int64(24 * time.Hour / time.Microsecond)
	mid := time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC).UnixMicro()
	want := []any{int64(0), limiter.DefaultMaxDelay.Microseconds(), DefaultBlockReset.Microseconds(), 0,
		1, 1, mid - 2*day, mid - day, mid, mid + day,
		int64(1), day, int64(1)}
	if fmt.Sprint(args) != fmt.Sprint(want) {
		t.Fatalf("args %v, want %v", args, want)
	}
	_, c := start(t)
	s := newStore(t, c, cfg)
	for _, tc := range []struct {
		redis time.Time
		ok    bool
		retry time.Duration
	}{
		{store.Add(-time.Second), true, 0},    // Redis behind: the 10th
		{store.Add(2 * time.Second), true, 0}, // Redis ahead, in the 11th: a new day
		{store.Add(3 * time.Second), false, 24*time.Hour - 2*time.Second},
	} {
		res, err := s.script.run(t.Context(), c, s.RedisKeys("k"), append([]any{"a", 1, 1, "0", tc.redis.UnixMicro()}, args...)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := res.([]any)
		if ok := n[0].(int64) == 1; ok != tc.ok || us(n[1].(int64)) != tc.retry {
			t.Errorf("Redis at %s: reply %v, want allowed %v retry %s", tc.redis, n, tc.ok, tc.retry)
		}
	}
}
