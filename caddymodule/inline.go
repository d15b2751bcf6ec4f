package caddymodule

// inlineLen is how many items an inline list keeps in place: most
// requests meet one or two rules of a handler.
const inlineLen = 4

// inline is a short list of what a request's rules hold, kept on the
// request's stack: its first inlineLen items in place, any past them on
// the heap. The zero list is empty. What the request takes (takings), holds
// (heldPlaces, inFlightSlots) and charges after the response
// (afterCharges) are each one.
type inline[T any] struct {
	buf  [inlineLen]T
	n    int
	more []T // past len(buf)
}

// add appends x.
func (l *inline[T]) add(x T) {
	if l.n < len(l.buf) {
		l.buf[l.n] = x
	} else {
		l.more = append(l.more, x)
	}
	l.n++
}

// len is the number of items.
func (l *inline[T]) len() int { return l.n }

// all is the items in order: the list's own array while they fit in it,
// else a copy.
func (l *inline[T]) all() []T {
	if l.n <= len(l.buf) {
		return l.buf[:l.n]
	}
	return append(l.buf[:], l.more...)
}

// each calls f with every item in order, in place.
func (l *inline[T]) each(f func(*T)) {
	for i := range min(l.n, len(l.buf)) {
		f(&l.buf[i])
	}
	for i := range l.more {
		f(&l.more[i])
	}
}

// reset empties the list.
func (l *inline[T]) reset() { *l = inline[T]{} }
