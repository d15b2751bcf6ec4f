package jwtkey

import (
	"hash/maphash"
	"math"
	"testing"
)

// A hash match alone is never a hit: the whole token must match.
func TestCacheHashCollisionNotServed(t *testing.T) {
	c := newCache(16)
	claims := Claims{m: map[string]any{"sub": "alice"}}
	c.put("token-a", claims, window{exp: math.MaxInt64, nbf: math.MinInt64})
	// Forge the entry of "token-a" into the slot and hash of "token-b".
	h := maphash.String(c.seed, "token-b")
	e := *c.slots[maphash.String(c.seed, "token-a")&c.mask].Load()
	e.hash = h
	c.slots[h&c.mask].Store(&e)
	if _, ok := c.get("token-b", 0, 0); ok {
		t.Fatal("served token-a's claims for token-b on a hash match")
	}
}

// Memory is bounded by the slots, however many tokens go through.
func TestCacheBounded(t *testing.T) {
	c := newCache(16)
	for i := range 10000 {
		c.put(string(rune(i)), Claims{}, window{exp: math.MaxInt64, nbf: math.MinInt64})
	}
	n := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			n++
		}
	}
	if n > 16 || len(c.slots) != 16 {
		t.Errorf("%d entries in %d slots", n, len(c.slots))
	}
}
