package sim

import "container/heap"

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
