package limiter

import "sync"

// Word 0 of a record holds the key's hash with its three low bits masked
// off, and three flags there; 0 marks an empty slot.
const (
	// refBit marks a key used since the CLOCK hand last passed it.
	refBit = 1
	// spentBit marks a key that its last decision left at (or over) one
	// of its limits, no unit left, if that was not its first request.
	// Such a key is evicted only when every key of its shard is spent
	// too, so that a flood of keys sent once never hands a spent key its
	// quota back.
	spentBit = 2
	// dirtyBit marks a key whose state changed since the last snapshot
	// (snapshot.go) wrote it. A decision sets it with refBit: the
	// lock-free path leaves a key without it to the locked path, so a key
	// costs one locked decision a snapshot interval.
	dirtyBit = 4
	// flagBits are the bits of word 0 that are not the hash.
	flagBits = refBit | spentBit | dirtyBit
	// usedBits are a decision's marks: referenced and changed.
	usedBits = refBit | dirtyBit
)

// shard holds a slice of the keys, under one lock: a table of records (see
// table.go), bounded to capacity keys by evicting with a CLOCK hand. On
// 64-bit platforms it is 192 bytes: in a slice of shards (which Go's
// allocator aligns to 64 bytes) each lock starts a cache line, which also
// holds what a decision reads of the table (TestShardLayout).
type shard struct {
	mu        sync.Mutex
	table     table
	capacity  int
	hand      int // CLOCK hand: the next slot it looks at
	evictions uint64
	limited   uint64   // evictions of spent keys, counted in evictions too
	_         [40]byte // keeps neighbouring shards' locks off one cache line
}

// sumShards adds up f over shards, one shard at a time: each f takes its
// shard's lock itself.
func sumShards[S any](shards []S, f func(*S) int) int {
	n := 0
	for i := range shards {
		n += f(&shards[i])
	}
	return n
}

// len is the number of live keys in s.
func (s *shard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.live
}

// insert makes room for a new key of hash h, by eviction if the shard is
// full, and returns its slot, whose state is zero. The new key starts
// unreferenced, so a flood of keys seen once evicts itself before it
// evicts keys in use. The slot is valid until the next insert or removal.
func (s *shard) insert(h uint64, p *plan, now int64) int {
	for s.table.live >= s.capacity && s.table.live > 0 {
		s.evict(p, now)
	}
	return s.table.add(h)
}

// evict removes one key with the CLOCK hand: the first idle key it meets,
// or the first not used since the hand last passed (clearing the marks of
// those that were), passing over spent keys unless every key is spent.
// The hand visits the slots in the order of the table's hop (handHop):
// every slot once a turn, scattered over the table rather than in a row.
// Nothing moves while the hand turns, so two turns always find one; the
// removal may then shift records back into slots the hand has passed or
// has yet to pass, so a turn may miss a record or see one twice (CLOCK is
// approximate).
//
// Passing over a spent key costs a word read; in a shard of spent keys
// and few others, an eviction may cost a turn of the hand
// (BenchmarkNewKeysEvictingAmongSpent).
func (s *shard) evict(p *plan, now int64) {
	t := &s.table
	n := t.slots()
	spentToo := t.spent >= t.live
	var buf [3]uint64
	for range 2*n + 1 {
		i := s.hand
		if i >= n { // the table was smaller when the hand last moved
			i %= n
		}
		if s.hand = i + t.hop; s.hand >= n {
			s.hand -= n
		}
		w := t.record(i)
		switch {
		case w[0] == 0:
			continue
		case w[0]&(refBit|spentBit) == 0:
			// unreferenced, not spent: evicted without a look at its state
		case w[0]&spentBit != 0 && !spentToo:
			continue // a word read: the sweep frees spent keys gone idle
		case t.idleHeld(p, i, now, &buf):
			t.setSpent(i, false) // nothing is spent any more
		case w[0]&refBit != 0:
			t.setWord0(i, w[0]&^refBit)
			continue
		}
		if w[0]&spentBit != 0 {
			s.limited++
		}
		t.remove(i)
		s.evictions++
		return
	}
}

// sweep removes the idle keys of the shard and returns how many. A removal
// shifts a later record into the emptied slot, so that slot is looked at
// again; a record shifted from the start of the table to its end, already
// seen, is seen twice, which is harmless.
func (s *shard) sweep(p *plan, now int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.table
	freed := 0
	var buf [3]uint64
	for i := 0; i < t.slots(); {
		if t.recs[i*t.stride] != 0 && t.idleHeld(p, i, now, &buf) {
			t.remove(i)
			freed++
			continue
		}
		i++
	}
	return freed
}

// idleHeld is p.idle for slot i, which holds a record. If it is idle, an
// atomic table keeps it frozen (lockfree.go) for the caller to remove:
// no decision lands on it meanwhile.
func (t *table) idleHeld(p *plan, i int, now int64, buf *[3]uint64) bool {
	w := t.hold(i, buf)
	if p.idle(w, t.logsAt(i), now) {
		return true
	}
	t.put(i, w)
	return false
}

// hashKey is key's 64-bit seeded hash, never 0 and with flagBits clear.
func hashKey(seed *hashSeed, key string) uint64 {
	h := seed.hashString(key) &^ flagBits
	if h == 0 {
		h = flagBits + 1
	}
	return h
}

// shardCount picks a power of two so that each shard holds at least 1,024
// keys when full, at most 256 shards.
func shardCount(maxKeys int) int {
	n := 1
	for n < 256 && maxKeys/(n*2) >= 1024 {
		n *= 2
	}
	return n
}
