package accuracy

// exactLog is an exact sliding log for many sources: for each, a ring of
// its last limit admission times. A request at t is allowed iff the source
// has fewer than limit admissions in (t−W, t]; times must not go back.
type exactLog struct {
	limit  int
	window int64   // ns
	times  []int64 // source s: times[s*limit:][:limit], a ring
	head   []int32 // source s: the ring's oldest entry, once full
	count  []int32 // source s: entries held, at most limit
}

// newExactLog is an empty log of limit admissions per window ns, for
// sources sources.
func newExactLog(sources, limit int, window int64) *exactLog {
	return &exactLog{
		limit:  limit,
		window: window,
		times:  make([]int64, sources*limit),
		head:   make([]int32, sources),
		count:  make([]int32, sources),
	}
}

// allow decides a request of src at t, and records it if allowed. With
// fewer than limit admissions ever, there is room. Otherwise the ring
// holds the last limit admissions: there is room iff the oldest of them
// has left the window (it is at or before t−W), and the new one takes its
// place.
func (l *exactLog) allow(src uint32, t int64) bool {
	ring := l.times[int(src)*l.limit:][:l.limit]
	n := int(l.count[src])
	if n < l.limit {
		ring[n] = t
		l.count[src]++
		return true
	}
	h := l.head[src]
	if ring[h] > t-l.window {
		return false
	}
	ring[h] = t
	h++
	if int(h) == l.limit {
		h = 0
	}
	l.head[src] = h
	return true
}
