package redisstore

import (
	"sync/atomic"
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

// periods are a Store's calendar limits, with the periods around the last
// time asked, per limit: a call computes them (a few µs) once a period.
type periods struct {
	cfg  Config
	last []atomic.Pointer[around]
}

// around is the periods around an instant: the previous period's start,
// the current one's start and end, the next one's end (µs).
type around struct{ prev, start, end, next int64 }

// newPeriods is cfg's calendar, or nil if no limit is a calendar period.
func newPeriods(cfg Config) *periods {
	if limiter.DefaultAlgorithm(cfg.Periods) != limiter.FixedWindow {
		return nil
	}
	return &periods{cfg: cfg, last: make([]atomic.Pointer[around], len(cfg.Periods))}
}

// at is the periods of calendar limit i around now (µs).
func (ps *periods) at(i int, now int64) *around {
	if a := ps.last[i].Load(); a != nil && now >= a.start && now < a.end {
		return a
	}
	p, loc := ps.cfg.Periods[i], ps.cfg.Location
	if loc == nil {
		loc = time.UTC
	}
	start, end := limiter.PeriodAt(p, loc, time.UnixMicro(now))
	prev, _ := limiter.PeriodAt(p, loc, start.Add(-time.Nanosecond))
	_, next := limiter.PeriodAt(p, loc, end)
	a := &around{prev.UnixMicro(), start.UnixMicro(), end.UnixMicro(), next.UnixMicro()}
	ps.last[i].Store(a)
	return a
}

// withPeriods is args (Config.args) with the calendar limits' periods
// around now put in, after the block durations.
func (ps *periods) withPeriods(args []any, now time.Time) []any {
	at := 4 + len(ps.cfg.BlockFor) // the number of calendar limits: 0 in args
	out := make([]any, 0, len(args)+5*len(ps.cfg.Periods))
	out = append(out, args[:at]...)
	out = append(out, 0)
	n := 0
	for i, p := range ps.cfg.Periods {
		if p == "" {
			continue
		}
		a := ps.at(i, now.UnixMicro())
		out = append(out, i+1, a.prev, a.start, a.end, a.next)
		n++
	}
	out[at] = n
	return append(out, args[at+1:]...)
}

// windowAt is the window of limit i at now (µs; the script's clock): a
// calendar period's length, or the limit's Window.
func (ps *periods) windowAt(i int, now int64) time.Duration {
	if ps.cfg.Periods[i] == "" {
		return ps.cfg.Limits[i].Window
	}
	a := ps.at(i, now)
	return time.Duration(a.end-a.start) * time.Microsecond
}

// clockNow is the Store's clock: the test's (Store.clock), else the
// host's.
func (s *Store) clockNow() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// window is limit i's window at now (µs): windowAt, or the Window of a
// Store without calendar limits.
func (s *Store) window(i int, now int64) time.Duration {
	if s.periods == nil {
		return s.cfg.Limits[i].Window
	}
	return s.periods.windowAt(i, now)
}
