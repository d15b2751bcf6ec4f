package gossip

import (
	"strconv"
	"testing"
)

// Vectors from the XXH64 reference implementation (seed 0). If one of
// these changes, nodes of different versions stop agreeing on keys.
func TestKeyHashVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	} {
		if got := KeyHash(tc.in); got != tc.want {
			t.Errorf("KeyHash(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

func TestKeyHashDistinct(t *testing.T) {
	seen := make(map[uint64]string)
	for i := 0; i < 256; i++ {
		for j := 0; j < 256; j++ {
			s := "10.0." + strconv.Itoa(i) + "." + strconv.Itoa(j)
			h := KeyHash(s)
			if prev, ok := seen[h]; ok {
				t.Fatalf("collision: %q and %q", prev, s)
			}
			seen[h] = s
		}
	}
}
