package topkeys

import (
	"unsafe"
)

const (
	// MaxKeyLen is the number of bytes of a key a Sketch keeps. Longer keys
	// are counted by their first MaxKeyLen bytes and reported Truncated.
	MaxKeyLen = 128

	// DefaultCapacity is the capacity recommended for a rate-limit rule:
	// 8 shards of 32 slots, 56 KiB. On Zipf-like traffic it returns the
	// exact top 10 of a million requests over 100,000 keys, and it tracks
	// any key with more than 1/32 of the traffic.
	DefaultCapacity = 256

	maxShards = 16 // shards of a large sketch
	minSlots  = 32 // slots of a shard, at the least, when there are several
)

// Sketch counts the heaviest keys of a stream in bounded memory
// (Space-Saving, Metwally et al. 2005). It is safe for concurrent use: Add,
// Reset and Top lock one shard at a time, chosen by a seeded hash of the
// key. The package documentation states its guarantees and costs.
type Sketch struct {
	hasher
	shift  uint // a hash's top bits pick its shard
	shards []shard
}

// Entry is a tracked key and its weight. The key's true weight (since its
// last Reset) is between Count−Error and Count.
type Entry struct {
	Key   string // the key, or its first MaxKeyLen bytes if Truncated
	Count uint64 // an upper bound of the key's weight, saturating
	Error uint64 // how much Count may overestimate; 0 means exact
	// Truncated is set if the key was longer than MaxKeyLen: Key is its
	// prefix, and Count the weight of every key with that prefix.
	Truncated bool
}

// New returns a Sketch that tracks about capacity keys (at least 1). The
// capacity is split into up to 16 shards of at least 32 slots each (one
// shard below 64) and rounded up to a multiple of the shards; Capacity
// reports it. Its memory, 216 bytes a slot, is allocated here and
// never grows.
func New(capacity int) *Sketch {
	capacity = max(capacity, 1)
	n, shift := 1, uint(64)
	for n < maxShards && capacity/(2*n) >= minSlots {
		n *= 2
		shift--
	}
	s := &Sketch{hasher: newHasher(), shift: shift, shards: make([]shard, n)}
	k := (capacity + n - 1) / n
	for i := range s.shards {
		s.shards[i].init(k)
	}
	return s
}

// Capacity is the number of keys s can track.
func (s *Sketch) Capacity() int {
	return len(s.shards) * len(s.shards[0].slots)
}

// shard is the shard of a key hashed to h.
func (s *Sketch) shard(h uint64) *shard {
	return &s.shards[h>>s.shift]
}

// Add counts weight for key. A weight of 0 does nothing; counts saturate
// at the largest uint64. Add does not allocate.
func (s *Sketch) Add(key string, weight uint64) {
	if weight == 0 {
		return
	}
	var k hkey
	s.prepare(&k, key)
	sh := s.shard(k.h)
	sh.mu.Lock()
	sh.add(&k, weight)
	sh.mu.Unlock()
}

// Reset forgets key: it is no longer tracked, and if it comes back it is
// counted afresh (with the Error of any newcomer). Total is unchanged.
func (s *Sketch) Reset(key string) {
	var k hkey
	s.prepare(&k, key)
	sh := s.shard(k.h)
	sh.mu.Lock()
	sh.reset(&k)
	sh.mu.Unlock()
}

// Total is the weight added to s since New, saturating, including the
// weight of keys since Reset or no longer tracked.
func (s *Sketch) Total() uint64 {
	var t uint64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		t = satAdd(t, sh.total)
		sh.mu.Unlock()
	}
	return t
}

// Bytes is the memory s holds: the Sketch, its shards, and their slots,
// buckets, indexes and key buffers.
func (s *Sketch) Bytes() int {
	n := int(unsafe.Sizeof(*s)) + cap(s.shards)*int(unsafe.Sizeof(shard{}))
	for i := range s.shards {
		n += s.shards[i].bytes()
	}
	return n
}
