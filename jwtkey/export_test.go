package jwtkey

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"
)

// ClaimsFromJSON decodes a payload as Verify does.
func ClaimsFromJSON(data []byte) (Claims, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return Claims{}, err
	}
	return Claims{m: m}, nil
}

// Cached reports whether Verify would serve token from the cache at now.
func (v *Verifier) Cached(token string, now time.Time) bool {
	if v.cache == nil {
		return false
	}
	_, ok := v.cache.get(token, now.UnixNano(), v.leeway)
	return ok
}

// CacheSlots returns the number of cache slots, 0 without a cache.
func (v *Verifier) CacheSlots() int {
	if v.cache == nil {
		return 0
	}
	return len(v.cache.slots)
}

// SameClaims reports whether a and b share one decoded map (one was served
// from the cache entry of the other).
func SameClaims(a, b Claims) bool {
	return a.m != nil && reflect.ValueOf(a.m).UnsafePointer() == reflect.ValueOf(b.m).UnsafePointer()
}

// CacheEntries returns the number of tokens in the cache.
func (v *Verifier) CacheEntries() int {
	n := 0
	if v.cache != nil {
		for i := range v.cache.slots {
			if v.cache.slots[i].Load() != nil {
				n++
			}
		}
	}
	return n
}
