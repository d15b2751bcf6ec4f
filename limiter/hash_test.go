package limiter

import (
	"hash/maphash"
	"testing"
)

// The seeded hash is a function of the seed and the key alone (a
// restarted process hashes a key as the one that wrote its snapshot), and
// another seed hashes differently.
func TestHashSeed(t *testing.T) {
	s := newHashSeed()
	copied := s
	other := newHashSeed()
	for _, key := range []string{"", "a", "ab", "abcd", "abcdefg", "12345678", "203.0.113.7", "2001:db8::1:2:3:4", string(make([]byte, 47)), string(make([]byte, 200))} {
		if s.hashString(key) != copied.hashString(key) {
			t.Errorf("%q: two hashes under one seed", key)
		}
		if s.hashString(key) == other.hashString(key) {
			t.Errorf("%q: the same hash under two seeds", key)
		}
	}
	if s.hashString("ab") == s.hashString("ba") || s.hashString("abcdefghijklmnopq") == s.hashString("abcdefghijklmnopr") {
		t.Error("keys a byte apart hash alike")
	}
}

// BenchmarkHashKey compares the seeded hash the keys are stored by with
// hash/maphash, which it replaced, on an IPv4 address and a 40-byte key.
func BenchmarkHashKey(b *testing.B) {
	s, ms := newHashSeed(), maphash.MakeSeed()
	for _, key := range []string{"203.0.113.7", "user:5f0c9b6e-81a4-4d2b-9b1e-6c1d2f3a4b5c"} {
		b.Run("wyhash/"+key[:4], func(b *testing.B) {
			var h uint64
			for b.Loop() {
				h += s.hashString(key)
			}
			_ = h
		})
		b.Run("maphash/"+key[:4], func(b *testing.B) {
			var h uint64
			for b.Loop() {
				h += maphash.String(ms, key)
			}
			_ = h
		})
	}
}
