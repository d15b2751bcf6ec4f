package jwtkey

import (
	"hash/maphash"
	"math/bits"
	"strings"
	"sync/atomic"
)

// DefaultCacheSize is the number of verified tokens a Verifier remembers when
// [Config.CacheSize] is zero.
const DefaultCacheSize = 4096

// maxCacheSize bounds [Config.CacheSize].
const maxCacheSize = 1 << 20

// cache remembers verified tokens: a fixed array of slots, each holding at
// most one immutable entry, chosen by a seeded hash of the whole token. A
// newer token replaces whatever its slot held, so memory is bounded by the
// number of slots. Slots are atomic pointers: no lock, no contention.
//
// A hit needs the whole token to match, not just its hash, and is re-checked
// against exp and nbf; an entry found expired is dropped.
type cache struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Pointer[cacheEntry]
}

type cacheEntry struct {
	hash   uint64
	token  string
	claims Claims
	window window
}

// newCache returns a cache of size slots (0: DefaultCacheSize), rounded up to
// a power of two.
func newCache(size int) *cache {
	if size == 0 {
		size = DefaultCacheSize
	}
	size = min(size, maxCacheSize)
	size = 1 << bits.Len(uint(size-1))
	return &cache{
		seed:  maphash.MakeSeed(),
		mask:  uint64(size - 1),
		slots: make([]atomic.Pointer[cacheEntry], size),
	}
}

// get returns the claims of token if it is cached and valid at now.
func (c *cache) get(token string, now, leeway int64) (Claims, bool) {
	h := maphash.String(c.seed, token)
	slot := &c.slots[h&c.mask]
	e := slot.Load()
	if e == nil || e.hash != h || e.token != token {
		return Claims{}, false
	}
	if now >= addSat(e.window.exp, leeway) {
		slot.CompareAndSwap(e, nil)
		return Claims{}, false
	}
	if now < addSat(e.window.nbf, -leeway) { // the clock went back: let Verify say why
		return Claims{}, false
	}
	return e.claims, true
}

// put remembers a verified token.
func (c *cache) put(token string, claims Claims, w window) {
	h := maphash.String(c.seed, token)
	c.slots[h&c.mask].Store(&cacheEntry{
		hash:   h,
		token:  strings.Clone(token), // not the request header the token may be part of
		claims: claims,
		window: w,
	})
}
