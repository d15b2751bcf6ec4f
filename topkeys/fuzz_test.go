package topkeys

import (
	"encoding/binary"
	"strings"
	"testing"
)

// fuzzKeys are the keys FuzzSketch draws from: short and long, around the
// 16-byte inline limit and MaxKeyLen, and long keys sharing a prefix.
var fuzzKeys = func() []string {
	keys := []string{"", "a", "ab", "abc", "abcd", "abcdefg", "abcdefgh",
		"0123456789abcdef", "0123456789abcdefX", "10.0.0.1", "2001:db8::1",
		strings.Repeat("p", MaxKeyLen), strings.Repeat("p", MaxKeyLen) + "1",
		strings.Repeat("p", MaxKeyLen) + "22", strings.Repeat("q", 3*MaxKeyLen)}
	for i := range 40 {
		keys = append(keys, "k"+string(rune('0'+i)))
	}
	return keys
}()

// FuzzSketch runs random adds (weights small, huge or 0), resets and
// arbitrary keys against a model of exact weights: it must not panic, and
// checkGuarantees must hold throughout (totals, Count ≥ Error, the
// Space-Saving bounds, Top's order, the shards' structure).
//
// The input: a capacity byte, then operations of 2 bytes (op, key), the
// op's top 2 bits choosing: add 1 to 64 / reset / add a weight read from
// the next 8 bytes (0 included) / add 1 to a key made of the next op&63
// bytes.
func FuzzSketch(f *testing.F) {
	f.Add([]byte{8, 0, 1, 0, 2, 0, 3, 128, 1})
	f.Add([]byte{1, 0, 1, 0x41, 2, 0x80, 0, 255, 255, 255, 255, 255, 255, 255, 255, 0x80, 3, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{64, 0x3f, 11, 0x3f, 12, 0x3f, 13, 0x3f, 14, 0xc5, 0, 'h', 'e', 'l', 'l', 'o', 0xc0, 0})
	f.Add([]byte{70, 1, 20, 2, 21, 3, 22, 4, 23, 0x80, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 22})
	f.Fuzz(fuzzSketch)
}

// fuzzSketch is the body of FuzzSketch.
func fuzzSketch(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	s, m := New(1+int(data[0])%80), newModel()
	data = data[1:]
	for ops := 0; len(data) >= 2; ops++ {
		op, key := data[0], fuzzKeys[int(data[1])%len(fuzzKeys)]
		data = data[2:]
		switch op >> 6 {
		case 0:
			w := uint64(op&63) + 1
			s.Add(key, w)
			m.add(key, w)
		case 1:
			s.Reset(key)
			m.reset(key)
		case 2:
			var w uint64
			if len(data) >= 8 {
				w, data = binary.LittleEndian.Uint64(data), data[8:]
			}
			s.Add(key, w)
			if w > 0 {
				m.add(key, w)
			}
		case 3:
			n := min(int(op&63), len(data))
			key, data = string(data[:n]), data[n:]
			s.Add(key, 1)
			m.add(key, 1)
		}
		if ops%64 == 63 {
			checkGuarantees(t, s, m)
		}
	}
	checkGuarantees(t, s, m)
}
