package limiter

// event is what one admission left in a sliding log: when, and how many
// units (admissions at the same nanosecond share an event).
type event struct {
	at    int64
	units int64
}

// eventLog is a key's sliding log: its events, oldest first. A log of at
// most one event keeps it in one, and allocates nothing: a key sent once
// (every key of a flood of one-shot keys) never has a ring. The second
// event moves the log into a ring, buf, grown on demand and never much
// beyond the limit (each event holds at least one unit, but for one left
// by a refund, and the units held never exceed the limit). An emptied log
// gives its memory back.
type eventLog struct {
	buf   []event // the ring; nil while the log holds at most one event, in one
	one   event   // the event of a log without a ring
	head  int32
	n     int32
	total int64 // units held
}

// shrinkAbove is the ring size above which an emptied log frees its buffer.
const shrinkAbove = 16

// at is event i of the log (0 ≤ i < n, or i = n < len(buf) for the slot a
// push fills): head+i wraps at most once, so a subtraction does what a
// modulo (a division) would.
func (l *eventLog) at(i int32) *event {
	if l.buf == nil {
		return &l.one
	}
	j := int(l.head) + int(i)
	if j >= len(l.buf) {
		j -= len(l.buf)
	}
	return &l.buf[j]
}

// expire drops the events at or before t.
func (l *eventLog) expire(t int64) { l.drop(l.since(t)) }

// drop removes the first k events, leaving held units (since's figures):
// an emptied ring above shrinkAbove frees its buffer.
func (l *eventLog) drop(k int32, held int64) {
	l.n -= k
	l.total = held
	if l.n == 0 && len(l.buf) > shrinkAbove {
		*l = eventLog{}
		return
	}
	if l.buf == nil { // k was 0, or the one event is gone: no trace of it kept
		if l.n == 0 {
			l.one = event{}
		}
		return
	}
	if l.head += k; int(l.head) >= len(l.buf) {
		l.head -= int32(len(l.buf))
	}
}

// since is the index of the first event after t, and the units held from
// it on: the log as expire(t) would leave it, without changing it.
func (l *eventLog) since(t int64) (int32, int64) {
	held := l.total
	for i := int32(0); i < l.n; i++ {
		e := l.at(i)
		if e.at > t {
			return i, held
		}
		held -= e.units
	}
	return l.n, held
}

// newest is the time of the latest event, or minInt64 when empty.
func (l *eventLog) newest() int64 {
	if l.n == 0 {
		return -1 << 63
	}
	return l.at(l.n - 1).at
}

// push records units taken at t (t never before the newest event).
func (l *eventLog) push(t, units int64) {
	l.total += units
	if l.n > 0 {
		if e := l.at(l.n - 1); e.at == t {
			e.units += units
			return
		}
	}
	if l.buf == nil && l.n == 0 {
		l.one, l.n = event{at: t, units: units}, 1
		return
	}
	if l.buf == nil || int(l.n) == len(l.buf) { // the one event and a second, or a full ring
		l.grow()
	}
	*l.at(l.n) = event{at: t, units: units}
	l.n++
}

// grow doubles the ring (makes one of 4 for a log of one event), unrolled
// so the oldest event comes first.
func (l *eventLog) grow() {
	buf := make([]event, max(4, 2*len(l.buf)))
	for i := int32(0); i < l.n; i++ {
		buf[i] = *l.at(i)
	}
	l.buf, l.head, l.one = buf, 0, event{}
}

// slidingLog admits cost units if the units taken in (now−w, now] leave
// room for them. It changes nothing: the caller expires old events and
// pushes the new one (logAdmit) once every limit has said yes, so that a
// denied or peeked request at a later time does not expire events early
// for a request that comes back in time. If time went backwards, the log
// is judged at its newest event, but Reset and RetryAfter still count
// from now.
func slidingLog(s *step, l *eventLog, now, w, n, cost int64) {
	first, held := l.since(max(now, l.newest()) - w)
	live := l.n > first
	if held+cost > n {
		reset := int64(0)
		if live {
			reset = l.newest() + w - now
		}
		next := logRetry(l, first, max(held, n), now, w, n, 1)
		*s = step{quota: newQuota(n, w, n-held, reset, next), retry: logRetry(l, first, held, now, w, n, cost), never: cost > n}
		return
	}
	reset := int64(0)
	switch {
	case cost > 0:
		reset = max(now, l.newest()) + w - now
	case live:
		reset = l.newest() + w - now
	}
	// Effective: if the key took what is left now, the first unit back is
	// the oldest live event's (or, with none, the units taken now).
	next := logRetry(l, first, max(held+cost, n), now, w, n, 1)
	*s = step{ok: true, quota: newQuota(n, w, n-held-cost, reset, next)}
}

// logAdmit records cost units taken at now (or at the newest event, if
// time went backwards), expiring the events that left the window.
func logAdmit(l *eventLog, now, w, cost int64) {
	t := max(now, l.newest())
	l.expire(t - w)
	l.push(t, cost)
}

// logTake is the locked path's shortcut for a rule of one sliding log of
// n per w (no burst bucket, no shares) and an unscaled request of cost
// whose quota nobody reads: it takes the request, as slidingLog and
// logAdmit would, if it fits and leaves a unit, and reports whether it
// did. A request it would deny or that takes the last unit (the key then
// spent) it leaves to decide, which reports the quota too.
func logTake(l *eventLog, now, w, n, cost int64) bool {
	t := max(now, l.newest())
	first, held := l.since(t - w)
	if cost < 1 || cost >= n-held { // no unit left after it, or denied
		return false
	}
	l.drop(first, held)
	l.push(t, cost)
	return true
}

// logRetry is how long from now until enough events age out for cost units
// to fit, held units being in the events from first on.
func logRetry(l *eventLog, first int32, held, now, w, n, cost int64) int64 {
	if cost > n {
		return w
	}
	for i := first; i < l.n; i++ {
		e := l.at(i)
		held -= e.units
		if held+cost <= n {
			return max(e.at+w-now, 1)
		}
	}
	return w
}
