package topkeys

import (
	"bytes"
	"slices"
	"strings"
	"sync"
)

// Top returns the n heaviest tracked keys, by Count descending then Key
// ascending (a Truncated key after the same untruncated bytes); all of
// them if n ≤ 0 or n exceeds the number tracked. Each shard is copied
// under its lock (under a microsecond for 64 keys); the selection is done
// after, in O(k log n) for k tracked keys. The result is two allocations:
// the entries, and one string for all their keys. The copies (40 bytes a
// tracked key, and its bytes) are pooled, outside Bytes.
func (s *Sketch) Top(n int) []Entry {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	sc.cands, sc.arena = sc.cands[:0], sc.arena[:0]
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.snapshot(sc)
		sh.mu.Unlock()
	}
	for i := range sc.cands {
		if c := &sc.cands[i]; int(c.klen) <= shortKey {
			c.off = uint32(len(sc.arena))
			sc.arena = appendWords(sc.arena, c.w0, c.w1, int(c.klen))
		}
	}
	top := sc.cands
	if n > 0 && n < len(top) {
		top = sc.best(n)
	} else {
		n = len(top)
	}
	slices.SortFunc(top, func(a, b cand) int {
		switch {
		case sc.before(&a, &b):
			return -1
		case sc.before(&b, &a):
			return 1
		}
		return 0
	})

	size := 0
	for i := range top {
		size += int(top[i].klen)
	}
	var b strings.Builder
	b.Grow(size)
	for i := range top {
		b.Write(sc.key(&top[i]))
	}
	keys := b.String()
	res := make([]Entry, n)
	off := 0
	for i, c := range top {
		end := off + int(c.klen)
		res[i] = Entry{Key: keys[off:end], Count: c.count, Error: c.err, Truncated: c.trunc}
		off = end
	}
	return res
}

// cand is a tracked key copied for Top; its bytes are in scratch.arena.
type cand struct {
	count, err uint64
	w0, w1     uint64
	off        uint32
	klen       uint8
	trunc      bool
}

// scratch holds what Top copies from the shards, reused across calls.
type scratch struct {
	cands []cand
	arena []byte
	heap  []cand
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (sc *scratch) key(c *cand) []byte {
	return sc.arena[c.off : c.off+uint32(c.klen)]
}

// before is Top's order: Count descending, Key ascending, the untruncated
// key first.
func (sc *scratch) before(a, b *cand) bool {
	if a.count != b.count {
		return a.count > b.count
	}
	if c := bytes.Compare(sc.key(a), sc.key(b)); c != 0 {
		return c < 0
	}
	return !a.trunc && b.trunc
}

// best returns the n first of sc.cands in Top's order, unsorted: a heap
// of n whose root is the last of them, which most candidates fail to beat
// on count alone.
func (sc *scratch) best(n int) []cand {
	h := append(sc.heap[:0], sc.cands[:n]...)
	for i := n/2 - 1; i >= 0; i-- {
		sc.down(h, i)
	}
	for i := n; i < len(sc.cands); i++ {
		if c := &sc.cands[i]; c.count >= h[0].count && sc.before(c, &h[0]) {
			h[0] = *c
			sc.down(h, 0)
		}
	}
	sc.heap = h
	return h
}

// down restores heap h below position p: no entry comes before its
// children in Top's order.
func (sc *scratch) down(h []cand, p int) {
	for {
		m := p
		if l := 2*p + 1; l < len(h) && sc.before(&h[m], &h[l]) {
			m = l
		}
		if r := 2*p + 2; r < len(h) && sc.before(&h[m], &h[r]) {
			m = r
		}
		if m == p {
			return
		}
		h[p], h[m] = h[m], h[p]
		p = m
	}
}
