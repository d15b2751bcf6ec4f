package topkeys

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// none marks the end of a list of slots or buckets.
const none = -1

// slot is a tracked key of a shard, or a free slot. A short key is its
// words w0, w1; a longer key's bytes are in the shard's keys buffer at
// slot number × MaxKeyLen. Its count is its bucket's.
type slot struct {
	err        uint64 // the count the key inherited when it took the slot
	w0, w1     uint64 // the key's words (see hkey)
	hash       uint32 // low bits of the key's hash, to find it in the index
	bucket     int32  // the bucket of the key's count, or none if free
	prev, next int32  // the other slots of the bucket, or the free list
	klen       uint8  // bytes of key stored
	trunc      bool   // the key was longer than MaxKeyLen
}

// shardState is a Space-Saving summary of len(slots) keys, kept as a
// Stream-Summary: the tracked keys grouped in buckets of equal count, the
// buckets in a list by ascending count (buckets.go). Every field is
// guarded by mu.
type shardState struct {
	mu    sync.Mutex
	total uint64 // weight added to the shard
	floor uint64 // the last count evicted: no untracked key weighs more

	minB, freeB, freeS int32 // lightest bucket, free buckets, free slots

	slots   []slot
	buckets []bucket
	index   index
	keys    []byte
}

// shard pads shardState to a multiple of 128 bytes, so that two shards'
// locks never share a cache line (or an adjacent-line prefetch pair). The
// padding comes first: a zero-size last field would itself be padded.
type shard struct {
	_ [(128 - unsafe.Sizeof(shardState{})%128) % 128]byte
	shardState
}

func (sh *shard) init(k int) {
	sh.slots = make([]slot, k)
	sh.buckets = make([]bucket, k)
	for i := range k {
		sh.slots[i] = slot{bucket: none, prev: none, next: int32(i + 1)}
		sh.buckets[i] = bucket{first: none, prev: none, next: int32(i + 1)}
	}
	sh.slots[k-1].next, sh.buckets[k-1].next = none, none
	sh.minB, sh.freeB, sh.freeS = none, 0, 0
	sh.index = newIndex(k)
	sh.keys = make([]byte, k*MaxKeyLen)
}

// bytes is the memory sh holds outside the shard struct.
func (sh *shard) bytes() int {
	return cap(sh.slots)*int(unsafe.Sizeof(slot{})) +
		cap(sh.buckets)*int(unsafe.Sizeof(bucket{})) +
		cap(sh.index)*int(unsafe.Sizeof(ientry{})) +
		cap(sh.keys)
}

// find returns the slot of k, or -1.
func (sh *shard) find(k *hkey) int {
	ix := sh.index
	mask := uint32(len(ix) - 1)
	h := uint32(k.h)
	for p := h & mask; ; p = (p + 1) & mask {
		e := ix[p]
		if e.slot == 0 {
			return -1
		}
		if e.hash == h && sh.holds(int(e.slot-1), k) {
			return int(e.slot - 1)
		}
	}
}

// holds reports whether slot i holds k.
func (sh *shard) holds(i int, k *hkey) bool {
	sl := &sh.slots[i]
	if sl.w0 != k.w0 || sl.w1 != k.w1 || int(sl.klen) != len(k.s) || sl.trunc != k.trunc {
		return false
	}
	off := i * MaxKeyLen
	return len(k.s) <= shortKey || string(sh.keys[off:off+len(k.s)]) == k.s
}

// add counts weight w > 0 for k. It is find, inlined, then bump's fast
// path: the hot path.
func (sh *shard) add(k *hkey, w uint64) {
	sh.total = satAdd(sh.total, w)
	ix := sh.index
	mask := uint32(len(ix) - 1)
	h := uint32(k.h)
	for p := h & mask; ; p = (p + 1) & mask {
		e := ix[p]
		if e.slot == 0 {
			sh.miss(k, w)
			return
		}
		if e.hash != h || !sh.holds(int(e.slot-1), k) {
			continue
		}
		// A heavy key is alone in its bucket, below the next one: its
		// bucket's count goes up in place. Otherwise bump moves it.
		i := int32(e.slot - 1)
		sl := &sh.slots[i]
		bk := &sh.buckets[sl.bucket]
		if c := bk.count + w; c > bk.count && bk.first == i && sl.next == none &&
			(bk.next == none || sh.buckets[bk.next].count > c) {
			bk.count = c
			return
		}
		sh.bump(i, w)
		return
	}
}

// miss counts weight w > 0 for k, which is not tracked: it takes a free
// slot, or the slot of a key of the lightest bucket. Either way it
// inherits floor, the count of the last key evicted, so that its count
// bounds its true weight.
func (sh *shard) miss(k *hkey, w uint64) {
	var i int32
	if sh.freeS != none {
		i = sh.freeS
		sh.freeS = sh.slots[i].next
		sh.place(i, satAdd(sh.floor, w), none)
	} else {
		i = sh.buckets[sh.minB].first
		sh.floor = sh.buckets[sh.minB].count
		sh.index.remove(sh.slots[i].hash, int(i))
		sh.bump(i, w)
	}
	sl := &sh.slots[i]
	sl.err, sl.w0, sl.w1, sl.hash = sh.floor, k.w0, k.w1, uint32(k.h)
	sl.klen, sl.trunc = uint8(len(k.s)), k.trunc
	if len(k.s) > shortKey { // a short key is its words
		copy(sh.keys[int(i)*MaxKeyLen:], k.s)
	}
	sh.index.insert(uint32(k.h), int(i))
}

// reset forgets k, freeing its slot.
func (sh *shard) reset(k *hkey) {
	i := sh.find(k)
	if i < 0 {
		return
	}
	sh.index.remove(sh.slots[i].hash, i)
	sh.unlink(int32(i))
	sh.slots[i] = slot{bucket: none, prev: none, next: sh.freeS}
	sh.freeS = int32(i)
}

// snapshot appends sh's tracked keys to sc: their counts and words, and
// the bytes of long keys; Top makes the short keys' bytes after unlocking.
func (sh *shard) snapshot(sc *scratch) {
	for i := range sh.slots {
		sl := &sh.slots[i]
		if sl.bucket == none {
			continue
		}
		c := cand{
			count: sh.buckets[sl.bucket].count,
			err:   sl.err,
			w0:    sl.w0,
			w1:    sl.w1,
			klen:  sl.klen,
			trunc: sl.trunc,
		}
		if int(sl.klen) > shortKey {
			c.off = uint32(len(sc.arena))
			off := i * MaxKeyLen
			sc.arena = append(sc.arena, sh.keys[off:off+int(sl.klen)]...)
		}
		sc.cands = append(sc.cands, c)
	}
}

// appendKey appends the key of slot i to dst.
func (sh *shard) appendKey(dst []byte, i int) []byte {
	sl := &sh.slots[i]
	if n := int(sl.klen); n > shortKey {
		off := i * MaxKeyLen
		return append(dst, sh.keys[off:off+n]...)
	}
	return appendWords(dst, sl.w0, sl.w1, int(sl.klen))
}

// appendWords appends to dst the key of n ≤ shortKey bytes whose words
// are w0, w1 (see hasher.prepare).
func appendWords(dst []byte, w0, w1 uint64, n int) []byte {
	var b [shortKey]byte
	switch {
	case n >= 8:
		binary.LittleEndian.PutUint64(b[:], w0)
		binary.LittleEndian.PutUint64(b[n-8:], w1)
	case n >= 4:
		binary.LittleEndian.PutUint32(b[:], uint32(w0>>32))
		binary.LittleEndian.PutUint32(b[n-4:], uint32(w0))
	case n > 0:
		b[0], b[n>>1], b[n-1] = byte(w0>>16), byte(w0>>8), byte(w0)
	}
	return append(dst, b[:n]...)
}

// satAdd is a+b, or the largest uint64 if that overflows.
func satAdd(a, b uint64) uint64 {
	if c := a + b; c >= a {
		return c
	}
	return ^uint64(0)
}
