package limiter

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSlidingLog(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{3, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 2, reset: s1},
		{at: 300 * ms, cost: 1, ok: true, rem: 1, reset: s1},
		{at: 600 * ms, cost: 1, ok: true, rem: 0, reset: s1},
		// the unit taken at 0 leaves the window at 1s
		{at: 900 * ms, cost: 1, ok: false, rem: 0, reset: 700 * ms, retry: 100 * ms},
		{at: s1 - ns, cost: 1, ok: false, rem: 0, reset: 600*ms + ns, retry: ns},
		{at: s1, cost: 1, ok: true, rem: 0, reset: s1},
		// 2 units need the events at 300ms and 600ms gone
		{at: s1, cost: 2, ok: false, rem: 0, reset: s1, retry: 600 * ms},
		{at: s1, cost: 4, ok: false, rem: 0, reset: s1, retry: s1},
		{at: s1, cost: 0, ok: true, rem: 0, reset: s1},
		{at: s1, cost: -2, ok: true, rem: 0, reset: s1},
		// time going backwards: judged at the newest event, waits counted from now
		{at: 500 * ms, cost: 1, ok: false, rem: 0, reset: 1500 * ms, retry: 800 * ms},
		{at: 1300 * ms, cost: 1, ok: true, rem: 0, reset: s1},
		{at: 5 * s1, cost: 3, ok: true, rem: 0, reset: s1},
		// cost 0 on an empty log: nothing to reset
		{at: 10 * s1, cost: 0, ok: true, rem: 3, reset: 0},
	})
}

func TestSlidingLogBurst(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{10, s1}}, Burst: 2})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 1, reset: s1},
		{at: 0, cost: 1, ok: true, rem: 0, reset: s1},
		{at: 0, cost: 1, ok: false, rem: 0, reset: s1, retry: 100 * ms},
		{at: 100 * ms, cost: 1, ok: true, rem: 0, reset: s1},
		{at: 200 * ms, cost: 3, ok: false, rem: 1, reset: 900 * ms, retry: s1},
	})
}

// Units taken at the same nanosecond share one event, and a log holds no
// more events than units.
func TestSlidingLogEvents(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{1000, time.Minute}}})
	for range 500 {
		l.AllowAt("k", base, 1)
	}
	for i := range 100 {
		l.AllowAt("k", base.Add(time.Duration(i+1)), 2)
	}
	log := logOf(t, l, "k")
	if log.n != 101 || log.total != 700 {
		t.Fatalf("log holds %d events, %d units; want 101, 700", log.n, log.total)
	}
	// a peek or a request that takes nothing changes nothing
	later := base.Add(2 * time.Minute)
	if d := l.PeekAt("k", later, 0); d.Quotas[0].Remaining != 1000 || !d.Allowed {
		t.Fatalf("Remaining = %d, want 1000", d.Quotas[0].Remaining)
	}
	l.AllowAt("k", later, 0)
	if log := logOf(t, l, "k"); log.n != 101 {
		t.Fatalf("a request of cost 0 expired events: %d left", log.n)
	}
	// all expire when the next unit is taken: the grown ring is given
	// back, and the one event left needs none
	if d := l.AllowAt("k", later, 1); d.Quotas[0].Remaining != 999 {
		t.Fatalf("Remaining = %d, want 999", d.Quotas[0].Remaining)
	}
	if log := logOf(t, l, "k"); log.buf != nil || log.n != 1 || log.total != 1 {
		t.Fatalf("expired log keeps %d slots, %d events, %d units", len(log.buf), log.n, log.total)
	}
}

// A log of one event keeps it in the log itself; the second event moves
// both into a ring of 4, oldest first, and the log reads the same.
func TestSlidingLogOneEventInline(t *testing.T) {
	var l eventLog
	l.push(10, 2)
	l.push(10, 1) // the same nanosecond: the same event
	if l.buf != nil || l.n != 1 || l.total != 3 || *l.at(0) != (event{10, 3}) {
		t.Fatalf("one event: %d slots, %d events, %d units, first %+v", len(l.buf), l.n, l.total, *l.at(0))
	}
	l.push(20, 1)
	if len(l.buf) != 4 || l.n != 2 || l.total != 4 || *l.at(0) != (event{10, 3}) || *l.at(1) != (event{20, 1}) {
		t.Fatalf("two events: %d slots, %d events, %d units, %+v %+v", len(l.buf), l.n, l.total, *l.at(0), *l.at(1))
	}
	l.giveBack(20, 20, 100, 1) // a refund of the newest: its time stays, in an event of no units
	if l.n != 2 || l.total != 3 || l.newest() != 20 || l.at(1).units != 0 {
		t.Fatalf("after the refund: %d events, %d units, newest %d", l.n, l.total, l.newest())
	}

	var m eventLog
	m.push(10, 1)
	m.expire(10) // the one event leaves
	if m.n != 0 || m.total != 0 || m.one != (event{}) || m.newest() != -1<<63 {
		t.Fatalf("expired: %d events, %d units, newest %d", m.n, m.total, m.newest())
	}
	m.push(30, 1)
	m.giveBack(30, 30, 100, 1) // its time stays, in an event of no units
	if m.buf != nil || m.n != 1 || m.total != 0 || m.newest() != 30 {
		t.Fatalf("refunded: %d slots, %d events, %d units, newest %d", len(m.buf), m.n, m.total, m.newest())
	}
}

// logOf is key's first event log.
func logOf(t *testing.T, l *Limiter, key string) eventLog {
	t.Helper()
	h := hashKey(&l.seed, key)
	s := l.shard(h)
	slot, ok := s.table.find(h)
	if !ok {
		t.Fatalf("no key %q", key)
	}
	return s.table.logsAt(slot)[0]
}

// A peek or a denied request at a later time expires nothing: a request
// that comes back in time is judged as before.
func TestSlidingLogLaterPeek(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{1, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 1, ok: true, rem: 0, reset: s1},
		{at: 5 * s1, cost: 1, ok: true, rem: 0, reset: s1, op: peek},
		{at: 5 * s1, cost: 2, ok: false, rem: 1, reset: 0, retry: s1},
		{at: 500 * ms, cost: 1, ok: false, rem: 0, reset: 500 * ms, retry: 500 * ms},
	})
}

// A refund keeps the log's time: the events its request expired are gone,
// and a request that comes back in time is judged at the later time.
func TestSlidingLogRefundKeepsTime(t *testing.T) {
	l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{5, s1}}})
	run(t, l, []tstep{
		{at: 0, cost: 5, ok: true, rem: 0, reset: s1},
		{at: 3 * s1, cost: 5, ok: true, rem: 0, reset: s1}, // expires the event at 0
		{at: 3 * s1, cost: 5, op: refund},
		{at: 500 * ms, cost: 5, ok: true, rem: 0, reset: 3500 * ms},
		{at: 500 * ms, cost: 1, ok: false, rem: 0, reset: 3500 * ms, retry: 3500 * ms},
	})
}

// logTake takes a request exactly when slidingLog admits it and leaves a
// unit, leaving the log as logAdmit would; what it declines is a denial,
// a cost below 1, or the last unit. On random logs (time going backwards
// too, rings wrapped and grown), times and costs around the limit.
func TestLogTakeMatchesStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 100000 {
		n := int64(1 + rng.IntN(12))
		w := int64(time.Millisecond) * int64(1+rng.IntN(50))
		var l eventLog
		now := int64(0)
		for range rng.IntN(40) {
			now += rng.Int64N(w / 4)
			var s step
			c := 1 + rng.Int64N(2)
			if slidingLog(&s, &l, now, w, n, c); s.ok {
				logAdmit(&l, now, w, c)
			}
		}
		now += rng.Int64N(w) - w/8 // now and then before the newest event
		cost := rng.Int64N(n+2) - 1
		var s step
		slidingLog(&s, &l, now, w, n, cost)
		want := cloneLog(l)
		if s.ok && cost > 0 {
			logAdmit(&want, now, w, cost)
		}
		got := cloneLog(l)
		took := logTake(&got, now, w, n, cost)
		if fits := s.ok && cost > 0 && s.quota.Remaining > 0; took != fits {
			t.Fatalf("case %d: n %d, cost %d: logTake %v, step ok %v with %d left", i, n, cost, took, s.ok, s.quota.Remaining)
		}
		if !took {
			want = cloneLog(l)
		}
		if !sameLog(&got, &want) {
			t.Fatalf("case %d: log %+v, want %+v", i, got, want)
		}
	}
}

// cloneLog is a copy of l that shares no buffer with it.
func cloneLog(l eventLog) eventLog {
	l.buf = slices.Clone(l.buf)
	return l
}

// sameLog is whether a and b hold the same events and units.
func sameLog(a, b *eventLog) bool {
	if a.n != b.n || a.total != b.total || len(a.buf) != len(b.buf) {
		return false
	}
	for i := range a.n {
		if *a.at(i) != *b.at(i) {
			return false
		}
	}
	return true
}
