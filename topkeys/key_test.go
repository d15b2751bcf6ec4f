package topkeys

import (
	"fmt"
	"testing"
)

// TestHashSpread: sequential keys, short (hashed inline) and long
// (maphash), spread evenly over the shards and the index's low bits.
func TestHashSpread(t *testing.T) {
	s := New(DefaultCapacity)
	for _, form := range []string{"10.0.%d.%d", "%d:%d", "api-key-000000000000-%05d-%05d"} {
		const n = 1 << 16
		shards := make([]int, len(s.shards))
		low := map[uint32]bool{}
		for i := range n {
			var k hkey
			s.prepare(&k, fmt.Sprintf(form, i>>8, i&255))
			shards[k.h>>s.shift]++
			low[uint32(k.h)&0xffff] = true
		}
		for i, c := range shards {
			if mean := n / len(shards); c < mean*9/10 || c > mean*11/10 {
				t.Errorf("%q: shard %d has %d keys of %d, mean %d", form, i, c, n, mean)
			}
		}
		// 2¹⁶ random values cover 1−1/e ≈ 63% of 2¹⁶ cells.
		if len(low) < n*60/100 {
			t.Errorf("%q: low 16 bits take %d values of %d", form, len(low), n)
		}
	}
}

// TestShortKeyWords: keys of up to 16 bytes are told apart by length and
// words alone, including those that differ in one byte or in length.
func TestShortKeyWords(t *testing.T) {
	s := New(64)
	seen := map[[3]uint64]string{}
	for n := range shortKey + 1 {
		for pos := range max(n, 1) {
			b := make([]byte, n)
			for i := range b {
				b[i] = 'x'
			}
			if n > 0 {
				b[pos] = 'y'
			}
			var k hkey
			s.prepare(&k, string(b))
			id := [3]uint64{uint64(n), k.w0, k.w1}
			if other, ok := seen[id]; ok && other != string(b) {
				t.Fatalf("%q and %q have the same words", other, b)
			}
			seen[id] = string(b)
		}
	}
}
