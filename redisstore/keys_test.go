package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// hostileKeys are user keys that try to move the hash tag or collide.
var hostileKeys = []string{
	"", "{", "}", "{}", "}{", "{{}}", "a{b}c", "{a}", "%", "%-", "%H", "%7B", "%25", "%%7B",
	"\x00", "\x00\xff{\r\n}", "ключ{}", strings.Repeat("{", 300), strings.Repeat("x", 10000),
	strings.Repeat("x", maxTagKey), strings.Repeat("x", maxTagKey+1), "%H" + strings.Repeat("0", 64),
}

// slotTag is the part of a Redis key that Redis Cluster hashes: between
// the first '{' and the first '}' after it, if not empty; else the key.
func slotTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestHashTagHostile: every Redis key of a user key hashes on the whole
// encoded user key, and distinct user keys never share state.
func TestHashTagHostile(t *testing.T) {
	_, c := start(t)
	for _, algo := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog} {
		s := newStore(t, c, config(algo, limiter.Limit{Count: 1, Window: time.Hour}, limiter.Limit{Count: 5, Window: 24 * time.Hour}))
		tags := map[string]string{}
		for i, key := range hostileKeys {
			tag := Escape(key)
			if prev, ok := tags[tag]; ok {
				t.Fatalf("Test %d: keys %q and %q share tag %q", i, prev, key, tag)
			}
			tags[tag] = key
			for _, rk := range s.RedisKeys(key) {
				if got := slotTag(rk); got != tag {
					t.Fatalf("Test %d: %q hashes on %q, want %q", i, rk, got, tag)
				}
			}
			if d := allow(t, s, key, 1); !d.Allowed {
				t.Fatalf("Test %d: first request of %q denied: it shares state", i, key)
			}
			if d := allow(t, s, key, 1); d.Allowed {
				t.Fatalf("Test %d: second request of %q allowed", i, key)
			}
		}
	}
}

// FuzzHashTag: a tag has no brace, is never empty, is bounded, and
// decodes back to its key (so distinct keys get distinct tags).
func FuzzHashTag(f *testing.F) {
	for _, k := range hostileKeys {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		tag := Escape(key)
		if tag == "" || strings.ContainsAny(tag, "{}") || len(tag) > 3*maxTagKey {
			t.Fatalf("Escape(%q) = %q", key, tag)
		}
		if len(key) > maxTagKey {
			if !strings.HasPrefix(tag, "%H") || len(tag) != 66 {
				t.Fatalf("long key: tag %q", tag)
			}
			return
		}
		if got := unescapeTag(tag); got != key {
			t.Fatalf("Escape(%q) = %q decodes to %q", key, tag, got)
		}
	})
}

// unescapeTag inverts Escape for keys of at most maxTagKey bytes.
func unescapeTag(tag string) string {
	if tag == "%-" {
		return ""
	}
	r := strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
	return r.Replace(tag)
}
