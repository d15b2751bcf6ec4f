package limiter

import "sync/atomic"

// A table holds a shard's keys: an open-addressing hash table whose slots
// are the keys' records themselves, so that finding a key and reading its
// state touch one cache line in the common case. A record is stride words:
// word 0 is the key's hash with flagBits (0 marks an empty slot), then the
// plan's state words. Keys are placed by linear probing from their home
// slot, the table is at most 13/16 full and grows by a quarter of a power
// of two when it would be more (16, 20, 24, 28, 32, 40, …: a table is 13/16
// to 13/20 full after it grows, not 3/8 as after a doubling), and a removal shifts back the records after it that would no longer be
// found (no tombstones pile up when keys come and go: a flood of new keys
// evicts one key per request).
//
// Invariants: the number of slots is 0 or one of those sizes; every record lies
// on the probe path from its home, with no empty slot in between; every
// word of an empty slot is 0 (but word cw of an atomic table's, which may
// be frozenWord), and so are its event logs.
//
// The event logs of a SlidingLog key (eventLogs hold pointers, which
// []uint64 words cannot) live in a side array indexed by slot, and move
// with their record.
type table struct {
	// what a decision reads first, on the shard lock's cache line
	recs   []uint64 // slot i: recs[i*stride:][:stride]
	ring   ring     // the slots; n = 0 while none is allocated
	stride int      // words a record
	live   int      // records held
	nlogs  int      // event logs a record
	spent  int      // records with spentBit set

	logs []eventLog // slot i: logs[i*nlogs:][:nlogs]

	// cw marks an atomic table, read without the lock (lockfree.go):
	// stride 3, no logs, and cw the word (1 or 2) that the lock-free path
	// swaps; 0: not atomic. View is its records for those readers.
	cw   int
	view atomic.Pointer[recView]

	// hop is the CLOCK hand's step (store.go): the slot after slot i that
	// the hand looks at is i+hop, cyclically. Set with the size.
	hop int
}

// minSlots is the size of a table's first allocation. A shard's table
// starts there and grows as keys come, so a limiter bounded to many keys
// but holding few costs little.
const minSlots = 16

// A table is at most maxLoadNum/maxLoadDen full. Linear probing at 13/16
// reads about 3 slots to find a key and 15 to miss one (1 and 3 at 1/2).
const maxLoadNum, maxLoadDen = 13, 16

// grow is the size after n slots: minSlots, then n plus a quarter of the
// power of two at or below n.
func grow(n int) int {
	if n < minSlots {
		return minSlots
	}
	k := 1
	for k*2 <= n {
		k *= 2
	}
	return n + k/4
}

// ring is the slot arithmetic of a table of n slots (n > 0): where the
// probe of a hash starts, the slot after a slot, how far one slot lies
// after another. The low bits of a hash are flagBits' place, always 0, so
// they are shifted out; a table of a power of two takes the hash's next
// bits, another size the next 32 bits scaled to it (a multiplication, not
// a division).
type ring struct{ n uint64 }

func (r ring) home(h uint64) uint64 {
	if r.n&(r.n-1) == 0 {
		return (h >> 3) & (r.n - 1)
	}
	return uint64(uint32(h>>3)) * r.n >> 32
}

func (r ring) next(i uint64) uint64 {
	if i++; i == r.n {
		return 0
	}
	return i
}

// handHop is the CLOCK hand's step in a table of n slots: about 5/8 of n,
// odd and prime to n, so that n steps visit every slot once, in an order
// that scatters the hand's removals over the table. A hand that stepped
// one slot at a time left the slots it had just emptied behind it and the
// oldest, fullest run of records ahead of it: at 13/16 full the table
// filled up just ahead of the hand, where every removal then shifted back
// a long run of records (BenchmarkNewKeysEvicting 5× slower, in
// table.remove).
func handHop(n int) int {
	h := n*5/8 | 1
	for gcd(h, n) != 1 {
		h += 2
	}
	return h
}

// gcd is the greatest common divisor of a and b.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// dist is how many slots to lies after from, cyclically.
func (r ring) dist(from, to uint64) uint64 {
	if to >= from {
		return to - from
	}
	return to + r.n - from
}

// newTable is an empty table of records of stride words and nlogs event
// logs. It allocates nothing until the first key.
func newTable(stride, nlogs int) table {
	return table{stride: stride, nlogs: nlogs}
}

// slots is the number of slots, 0 before the first key.
func (t *table) slots() int {
	if t.recs == nil {
		return 0
	}
	return int(t.ring.n)
}

// home is the slot where the probe for hash h starts.
func (t *table) home(h uint64) uint64 { return t.ring.home(h) }

// find is the slot of the key whose hash is h (flagBits clear), if the table
// holds it. It reads word 0 of each slot on the probe path, and stops at
// the first empty one, which the load bound guarantees.
func (t *table) find(h uint64) (int, bool) {
	if t.live == 0 {
		return 0, false
	}
	for i := t.home(h); ; i = t.ring.next(i) {
		w := t.recs[int(i)*t.stride]
		if w&^flagBits == h {
			return int(i), true
		}
		if w == 0 {
			return 0, false
		}
	}
}

// record is the words of slot i: the hash (with refBit), then the state.
func (t *table) record(i int) []uint64 {
	off := i * t.stride
	return t.recs[off : off+t.stride : off+t.stride]
}

// logsAt is the event logs of slot i (nil if the plan keeps none).
func (t *table) logsAt(i int) []eventLog {
	if t.nlogs == 0 {
		return nil
	}
	off := i * t.nlogs
	return t.logs[off : off+t.nlogs : off+t.nlogs]
}

// add enters a new key of hash h (flagBits clear, not in the table) and
// returns its slot, whose state words and logs are zero. It first grows
// the table if the key would make it more than 13/16 full.
func (t *table) add(h uint64) int {
	if maxLoadDen*(t.live+1) > maxLoadNum*t.slots() {
		t.resize(grow(t.slots()))
	}
	i := t.emptySlot(h)
	if t.cw != 0 {
		// the state (zero, encoded) before the hash: a reader that finds
		// the key finds its state
		atomic.StoreUint64(&t.recs[i*3+t.cw], h)
	}
	t.setWord0(i, h)
	t.live++
	return i
}

// emptySlot is the first empty slot on the probe path of hash h.
func (t *table) emptySlot(h uint64) int {
	i := t.home(h)
	for t.recs[int(i)*t.stride] != 0 {
		i = t.ring.next(i)
	}
	return int(i)
}

// resize moves every record, with its logs, into a new table of n slots (a
// size of grow's, above 16/13 of the records held).
func (t *table) resize(n int) {
	old := table{recs: t.recs, ring: t.ring, stride: t.stride, nlogs: t.nlogs, logs: t.logs}
	t.recs = make([]uint64, n*t.stride)
	t.logs = nil
	if t.nlogs > 0 {
		t.logs = make([]eventLog, n*t.nlogs)
	}
	t.ring = ring{uint64(n)}
	t.hop = handHop(n)
	for i := range old.slots() {
		w := old.record(i)
		if w[0] == 0 {
			continue
		}
		j := t.emptySlot(w[0] &^ flagBits)
		if c := t.cw; c != 0 {
			// the old array stays frozen: a reader still on it takes
			// the lock
			d := t.record(j)
			d[0], d[3-c] = w[0], w[3-c]
			d[c] = atomic.SwapUint64(&w[c], frozenWord)
		} else {
			copy(t.record(j), w)
		}
		copy(t.logsAt(j), old.logsAt(i))
	}
	if t.cw != 0 {
		t.view.Store(&recView{recs: t.recs, ring: t.ring})
	}
}

// remove empties slot i, which holds a record, and shifts back the records
// after it that its emptying would cut off from their home: each moves,
// with its logs, into the hole, which moves on to where it was, until the
// probe path ends. So a record may move from a later slot (cyclically) to
// slot i or after it: a caller iterating over the slots must look at slot
// i again.
func (t *table) remove(i int) {
	if t.recs[i*t.stride]&spentBit != 0 {
		t.spent--
	}
	if t.cw != 0 {
		atomic.StoreUint64(&t.recs[i*3+t.cw], frozenWord)
	}
	hole := uint64(i)
	for j := t.ring.next(hole); ; j = t.ring.next(j) {
		w := t.recs[int(j)*t.stride]
		if w == 0 {
			break
		}
		// the record at j may fill the hole if the hole lies cyclically
		// between its home and j
		if t.ring.dist(t.home(w&^flagBits), j) >= t.ring.dist(hole, j) {
			t.move(int(j), int(hole))
			hole = j
		}
	}
	// the last hole: slot i, the removed key's events with it, or the
	// slot of the last record moved, whose copy is now elsewhere
	if c := t.cw; c != 0 {
		// word cw stays frozen: an empty slot of an atomic table
		atomic.StoreUint64(&t.recs[int(hole)*3], 0)
		atomic.StoreUint64(&t.recs[int(hole)*3+3-c], 0)
	} else {
		clear(t.record(int(hole)))
	}
	clear(t.logsAt(int(hole)))
	t.live--
}

// move copies the record and the logs of slot from to slot to. Slot from
// keeps a copy until the caller fills or clears it. In an atomic table,
// word cw of slot to is frozen (it is a hole), and the record's identity
// lands there before its state: a reader that finds a hash never reads
// another key's state under it.
func (t *table) move(from, to int) {
	if c := t.cw; c != 0 {
		f, d := t.record(from), t.record(to)
		v := atomic.SwapUint64(&f[c], frozenWord)
		atomic.StoreUint64(&d[0], f[0])
		atomic.StoreUint64(&d[3-c], f[3-c])
		atomic.StoreUint64(&d[c], v)
		return
	}
	copy(t.record(to), t.record(from))
	copy(t.logsAt(to), t.logsAt(from))
}

// setSpent sets or clears the spentBit of slot i, which holds a record.
func (t *table) setSpent(i int, spent bool) {
	w := t.recs[i*t.stride]
	switch was := w&spentBit != 0; {
	case spent && !was:
		t.setWord0(i, w|spentBit)
		t.spent++
	case !spent && was:
		t.setWord0(i, w&^spentBit)
		t.spent--
	}
}
