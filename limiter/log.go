package limiter

// event is what one admission left in a sliding log: when, and how many
// units (admissions at the same nanosecond share an event).
type event struct {
	at    int64
	units int64
}

// eventLog is a key's sliding log: a ring of events, oldest first, grown
// on demand and never beyond the limit (each event holds at least one
// unit, and the units held never exceed the limit). An emptied log gives
// its memory back.
type eventLog struct {
	buf   []event
	head  int32
	n     int32
	total int64 // units held
}

// shrinkAbove is the ring size above which an emptied log frees its buffer.
const shrinkAbove = 16

func (l *eventLog) at(i int32) *event { return &l.buf[(int(l.head)+int(i))%len(l.buf)] }

// expire drops the events at or before t.
func (l *eventLog) expire(t int64) {
	for l.n > 0 {
		e := l.at(0)
		if e.at > t {
			return
		}
		l.total -= e.units
		l.head = int32((int(l.head) + 1) % len(l.buf))
		l.n--
	}
	if len(l.buf) > shrinkAbove {
		*l = eventLog{}
	}
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
	if int(l.n) == len(l.buf) {
		l.grow()
	}
	*l.at(l.n) = event{at: t, units: units}
	l.n++
}

// grow doubles the ring, unrolled so the oldest event comes first.
func (l *eventLog) grow() {
	buf := make([]event, max(4, 2*len(l.buf)))
	for i := int32(0); i < l.n; i++ {
		buf[i] = *l.at(i)
	}
	l.buf, l.head = buf, 0
}

// unpush takes back units from the newest events (a refund).
func (l *eventLog) unpush(units int64) {
	for units > 0 && l.n > 0 {
		e := l.at(l.n - 1)
		k := min(units, e.units)
		e.units -= k
		l.total -= k
		units -= k
		if e.units == 0 {
			l.n--
		}
	}
}

// slidingLog admits cost units if the units taken in (now−w, now] leave
// room for them. It expires old events but records nothing: the caller
// pushes the event once every limit has said yes.
func slidingLog(l *eventLog, now, w, n, cost int64) step {
	now = max(now, l.newest()) // time went backwards: judge at the newest event
	l.expire(now - w)
	reset := int64(0)
	if l.n > 0 {
		reset = l.newest() + w - now
	}
	if l.total+cost > n {
		return step{quota: newQuota(n, w, n-l.total, reset), retry: logRetry(l, now, w, n, cost)}
	}
	return step{ok: true, quota: newQuota(n, w, n-l.total-cost, w)}
}

// logRetry is how long until enough events age out for cost units to fit.
func logRetry(l *eventLog, now, w, n, cost int64) int64 {
	if cost > n {
		return w
	}
	held := l.total
	for i := int32(0); i < l.n; i++ {
		e := l.at(i)
		held -= e.units
		if held+cost <= n {
			return max(e.at+w-now, 1)
		}
	}
	return w
}
