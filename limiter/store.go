package limiter

import (
	"hash/maphash"
	"sync"
)

// pageBits sets the page size of a shard's slab: keys' words are kept in
// pages of 1<<pageBits keys, so the slab grows without copying and wastes
// at most one page per shard.
const pageBits = 8

// refBit marks a key used since the CLOCK hand last passed it. Word 0 of a
// key holds its hash with this bit masked off; 0 marks a free slot.
const refBit = 1

// shard holds a slice of the keys, under one lock. Slots are numbered;
// table indexes them by hash (see index.go).
type shard struct {
	mu        sync.Mutex
	table     []uint64
	pages     [][]uint64 // slot s: pages[s>>pageBits][(s&pageMask)*stride:][:stride]
	logs      []eventLog // slot s: logs[s*plan.logs:][:plan.logs]
	slots     int32      // slots handed out so far
	free      []int32    // slots freed by Delete, Sweep or a shrink
	live      int
	capacity  int
	hand      int32 // CLOCK hand
	evictions uint64
	_         [64]byte // keeps neighbouring shards' locks off one cache line
}

const pageMask = 1<<pageBits - 1

// words is slot's state: word 0 is the hash (with refBit), then the plan's.
func (s *shard) words(slot int32, stride int) []uint64 {
	off := int(slot&pageMask) * stride
	return s.pages[slot>>pageBits][off : off+stride : off+stride]
}

// logsOf is slot's event logs (nil if the plan keeps none).
func (s *shard) logsOf(slot int32, p *plan) []eventLog {
	if p.logs == 0 {
		return nil
	}
	off := int(slot) * p.logs
	return s.logs[off : off+p.logs : off+p.logs]
}

// insert makes room for a new key, by eviction if the shard is full, and
// returns its zeroed slot. The new key starts unreferenced, so a flood of
// keys seen once evicts itself before it evicts keys in use.
func (s *shard) insert(h uint64, p *plan, now int64) int32 {
	for s.live >= s.capacity && s.live > 0 {
		s.evict(p, now)
	}
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		slot = s.grow(p)
	}
	w := s.words(slot, p.stride)
	clear(w)
	w[0] = h
	s.link(h, slot)
	s.live++
	return slot
}

// grow hands out a slot never used before, adding a page when needed.
func (s *shard) grow(p *plan) int32 {
	slot := s.slots
	if int(slot>>pageBits) == len(s.pages) {
		s.pages = append(s.pages, make([]uint64, (1<<pageBits)*p.stride))
		if p.logs > 0 {
			s.logs = append(s.logs, make([]eventLog, (1<<pageBits)*p.logs)...)
		}
	}
	s.slots++
	return slot
}

// evict frees one slot with the CLOCK hand: the first idle key it meets, or
// the first not used since the hand last passed (clearing the marks of
// those that were). Two turns always find one.
func (s *shard) evict(p *plan, now int64) {
	for range 2*s.slots + 1 {
		slot := s.hand
		s.hand++
		if s.hand >= s.slots {
			s.hand = 0
		}
		w := s.words(slot, p.stride)
		switch {
		case w[0] == 0:
			continue
		case w[0]&refBit != 0 && !p.idle(w, s.logsOf(slot, p), now):
			w[0] &^= refBit
			continue
		}
		s.remove(slot, p)
		s.evictions++
		return
	}
}

// remove frees slot.
func (s *shard) remove(slot int32, p *plan) {
	w := s.words(slot, p.stride)
	s.unlink(w[0]&^refBit, slot)
	w[0] = 0
	clear(s.logsOf(slot, p))
	s.free = append(s.free, slot)
	s.live--
}

// sweep frees the idle keys of the shard and returns how many.
func (s *shard) sweep(p *plan, now int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	freed := 0
	for slot := range s.slots {
		w := s.words(slot, p.stride)
		if w[0] != 0 && p.idle(w, s.logsOf(slot, p), now) {
			s.remove(slot, p)
			freed++
		}
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
