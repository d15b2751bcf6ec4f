package limiter

import (
	"math/bits"
	"math/rand/v2"

	"github.com/edgebyte/edgelimit/internal/wordload"
)

// hashSeed keys a Limiter's hash of its keys. Unlike a maphash.Seed,
// whose hashes differ from one process to the next, it is five words that
// a snapshot writes down (snapshot.go), so that a restarted process
// hashes every key as the one that wrote the snapshot did and finds its
// state. The words are secret and random: a client cannot pick keys that
// collide in a table (their homes, or their hashes: keys are stored by
// hash alone).
type hashSeed [5]uint64

// newHashSeed is a random seed. The multiplier keys are odd, as the Go
// runtime's hashkey is: an even key would lose a bit of every product.
func newHashSeed() hashSeed {
	var s hashSeed
	for i := range s {
		s[i] = rand.Uint64() | 1
	}
	return s
}

// hashString is key's 64-bit hash under s: wyhash as the Go runtime's
// memhashFallback computes it (runtime/hash64.go), reading the string
// a word at a time. Short keys (an IP address, a token's subject) take
// two loads and two multiplications.
func (s *hashSeed) hashString(key string) uint64 {
	var a, b uint64
	seed := s[0]
	n := len(key)
	switch {
	case n == 0:
		return mix(seed, s[1])
	case n < 4:
		a = uint64(key[0]) | uint64(key[n>>1])<<8 | uint64(key[n-1])<<16
	case n == 4:
		a = wordload.Load32(key, 0)
		b = a
	case n < 8:
		a = wordload.Load32(key, 0)
		b = wordload.Load32(key, n-4)
	case n == 8:
		a = wordload.Load64(key, 0)
		b = a
	case n <= 16:
		a = wordload.Load64(key, 0)
		b = wordload.Load64(key, n-8)
	default:
		p, l := 0, n
		if l > 48 {
			seed1, seed2 := seed, seed
			for ; l > 48; l -= 48 {
				seed = mix(wordload.Load64(key, p)^s[2], wordload.Load64(key, p+8)^seed)
				seed1 = mix(wordload.Load64(key, p+16)^s[3], wordload.Load64(key, p+24)^seed1)
				seed2 = mix(wordload.Load64(key, p+32)^s[4], wordload.Load64(key, p+40)^seed2)
				p += 48
			}
			seed ^= seed1 ^ seed2
		}
		for ; l > 16; l -= 16 {
			seed = mix(wordload.Load64(key, p)^s[2], wordload.Load64(key, p+8)^seed)
			p += 16
		}
		a = wordload.Load64(key, p+l-16)
		b = wordload.Load64(key, p+l-8)
	}
	return mix(0x1d8e4e27c47d124f^uint64(n), mix(a^s[2], b^seed))
}

// mix is the two halves of a×b folded together.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
