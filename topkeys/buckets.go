package topkeys

// bucket is a count and the slots whose key has it, in a shard's list of
// buckets by ascending count (Stream-Summary, Metwally et al.). A key's
// count changes by moving its slot to another bucket; the lightest keys
// are those of the first bucket. With weight 1, the common case, every
// operation is O(1): a key moves to the next bucket, or its bucket moves
// up if the key is alone in it (as the heaviest keys are). A weight that
// jumps over b buckets costs O(b), at most the number of slots.
type bucket struct {
	count      uint64
	first      int32 // a slot of the bucket; the others follow by slot.next
	prev, next int32 // the buckets of the next lower and higher counts
}

// bump adds w to the count of tracked slot i.
func (sh *shard) bump(i int32, w uint64) {
	bs := sh.buckets
	sl := &sh.slots[i]
	b := sl.bucket
	bk := &bs[b]
	c := satAdd(bk.count, w)
	if c == bk.count {
		return // saturated
	}
	if bk.first == i && sl.next == none && (bk.next == none || bs[bk.next].count > c) {
		bk.count = c // alone, and still below the next bucket
		return
	}
	after := b
	if prev, freed := sh.unlink(i); freed {
		after = prev
	}
	sh.place(i, c, after)
}

// place puts unlinked slot i in the bucket of count c, creating it if
// needed, searching from the bucket after `after` (the first if none),
// whose count must be below c.
func (sh *shard) place(i int32, c uint64, after int32) {
	bs, ss := sh.buckets, sh.slots
	next := sh.minB
	if after != none {
		next = bs[after].next
	}
	for next != none && bs[next].count < c {
		after, next = next, bs[next].next
	}
	b := next
	if b == none || bs[b].count != c {
		b = sh.freeB // there are as many buckets as slots
		sh.freeB = bs[b].next
		bs[b] = bucket{count: c, first: none, prev: after, next: next}
		if after == none {
			sh.minB = b
		} else {
			bs[after].next = b
		}
		if next != none {
			bs[next].prev = b
		}
	}
	bk := &bs[b]
	sl := &ss[i]
	sl.bucket, sl.prev, sl.next = b, none, bk.first
	if bk.first != none {
		ss[bk.first].prev = i
	}
	bk.first = i
}

// unlink takes slot i out of its bucket. If that empties the bucket, the
// bucket is freed, and unlink reports it with the bucket before it.
func (sh *shard) unlink(i int32) (prev int32, freed bool) {
	bs, ss := sh.buckets, sh.slots
	sl := &ss[i]
	b := sl.bucket
	bk := &bs[b]
	if sl.prev != none {
		ss[sl.prev].next = sl.next
	} else {
		bk.first = sl.next
	}
	if sl.next != none {
		ss[sl.next].prev = sl.prev
	}
	sl.bucket = none
	if bk.first != none {
		return none, false
	}
	prev = bk.prev
	if prev != none {
		bs[prev].next = bk.next
	} else {
		sh.minB = bk.next
	}
	if bk.next != none {
		bs[bk.next].prev = prev
	}
	bk.next = sh.freeB
	sh.freeB = b
	return prev, true
}
