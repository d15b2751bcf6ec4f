// Package wordload reads little-endian words out of strings, for the
// hashes of package limiter and topkeys: the compiler makes each a
// single load.
package wordload

// Load64 is the little-endian word at s[i:i+8].
func Load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// Load32 is the little-endian word at s[i:i+4].
func Load32(s string, i int) uint64 {
	s = s[i : i+4]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
