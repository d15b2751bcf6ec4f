package redisstore

import (
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// A calendar limit (Config.Periods) is a fixed window whose start and
// length the zone's calendar gives, which the script cannot compute: each
// call gives it, per calendar limit, the periods around the Store's clock
// (the previous one's start, the current one's start and end, the next
// one's end), and the script counts in the one that holds Redis's clock
// (win, script_common.go). Nodes and Redis whose clocks differ by less
// than a period therefore agree on which period a request falls in, as
// they do for an epoch-aligned window: by Redis's clock.

// withPeriods is args (Config.args) with the calendar limits' periods
// around now put in, after the block durations.
func (c Config) withPeriods(args []any, now time.Time) []any {
	at := 4 + len(c.BlockFor) // the number of calendar limits: 0 in args
	out := make([]any, 0, len(args)+5*len(c.Periods))
	out = append(out, args[:at]...)
	out = append(out, 0)
	n := 0
	for i, p := range c.Periods {
		if p == "" {
			continue
		}
		start, end := limiter.PeriodAt(p, c.location(), now)
		prev, _ := limiter.PeriodAt(p, c.location(), start.Add(-time.Nanosecond))
		_, next := limiter.PeriodAt(p, c.location(), end)
		out = append(out, i+1, prev.UnixMicro(), start.UnixMicro(), end.UnixMicro(), next.UnixMicro())
		n++
	}
	out[at] = n
	return append(out, args[at+1:]...)
}

// windowAt is the window of limit i at nowMicros (the script's clock, µs):
// a calendar period's length, or the limit's Window.
func (c Config) windowAt(i int, nowMicros int64) time.Duration {
	if i >= len(c.Periods) || c.Periods[i] == "" {
		return c.Limits[i].Window
	}
	start, end := limiter.PeriodAt(c.Periods[i], c.location(), time.UnixMicro(nowMicros))
	return end.Sub(start)
}

// location is c.Location, or UTC.
func (c Config) location() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// clockNow is the Store's clock: the test's (Store.clock), else the
// host's.
func (s *Store) clockNow() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}
