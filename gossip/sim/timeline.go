package sim

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/edgebyte/edgelimit/gossip"
)

// event is a value due at a virtual time, in ns; seq orders the events
// due at the same time by when they were scheduled, so runs repeat.
type event[T any] struct {
	at, seq int64
	v       T
}

// timeline is the events scheduled, earliest first: messages in flight,
// requests to end.
type timeline[T any] []event[T]

// add schedules v at at, seq-th.
func (q *timeline[T]) add(at, seq int64, v T) { heap.Push(q, event[T]{at, seq, v}) }

// dueBefore reports whether the earliest event is due before t.
func (q timeline[T]) dueBefore(t int64) bool { return len(q) > 0 && q[0].at < t }

// next takes the earliest event.
func (q *timeline[T]) next() event[T] { return heap.Pop(q).(event[T]) }

func (q timeline[T]) Len() int { return len(q) }
func (q timeline[T]) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q timeline[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *timeline[T]) Push(x any)   { *q = append(*q, x.(event[T])) }
func (q *timeline[T]) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// network is the reports in flight between the nodes: each arrives its
// latency plus up to its jitter after it is sent.
type network struct {
	q               timeline[message]
	seq             int64
	rng             *rand.Rand
	latency, jitter time.Duration
}

// send sends r to node to at now (ns).
func (n *network) send(now int64, to int, r gossip.Report) {
	delay := int64(n.latency) + int64(n.rng.Float64()*float64(n.jitter))
	n.seq++
	n.q.add(now+delay, n.seq, message{to: to, r: r})
}

// deliver hands every report due before t to observe, with the node it
// is for and when it arrives (ns), earliest first.
func (n *network) deliver(t int64, observe func(to int, r gossip.Report, at int64)) {
	for n.q.dueBefore(t) {
		m := n.q.next()
		observe(m.v.to, m.v.r, m.at)
	}
}

// orDefault sets *p to v if it is the zero value: a scenario's default.
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}
