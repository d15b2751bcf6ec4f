package limiter

import (
	"hash/maphash"
	"sync"
)

// refBit marks a key used since the CLOCK hand last passed it. Word 0 of a
// record holds the key's hash with this bit masked off; 0 marks an empty
// slot.
const refBit = 1

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
	_         [80]byte // keeps neighbouring shards' locks off one cache line
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
// those that were). Nothing moves while the hand turns, so two turns
// always find one; the removal may then shift records back past the hand,
// which will miss them this turn (CLOCK is approximate).
func (s *shard) evict(p *plan, now int64) {
	t := &s.table
	n := t.slots()
	for range 2*n + 1 {
		i := s.hand & (n - 1)
		s.hand = i + 1
		w := t.record(i)
		switch {
		case w[0] == 0:
			continue
		case w[0]&refBit != 0 && !p.idle(w, t.logsAt(i), now):
			w[0] &^= refBit
			continue
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
	for i := 0; i < t.slots(); {
		w := t.record(i)
		if w[0] != 0 && p.idle(w, t.logsAt(i), now) {
			t.remove(i)
			freed++
			continue
		}
		i++
	}
	return freed
}

// hashKey is key's 64-bit seeded hash, never 0 and with refBit clear.
func hashKey(seed maphash.Seed, key string) uint64 {
	h := maphash.String(seed, key) &^ refBit
	if h == 0 {
		h = 2
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
