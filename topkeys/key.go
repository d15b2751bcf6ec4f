package topkeys

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"

	"github.com/edgebyte/edgelimit/internal/wordload"
)

// shortKey is the length up to which a key is held in two words, hashed
// inline and compared without reading its bytes.
const shortKey = 16

// hkey is a key ready for a shard: cut to MaxKeyLen, hashed, and packed in
// two words. A key of up to shortKey bytes is identified by its length and
// words; a longer one's words (its first and last 8 bytes) are a filter
// before its bytes are compared.
type hkey struct {
	s      string // the key, at most MaxKeyLen bytes
	h      uint64
	w0, w1 uint64
	trunc  bool // the key was cut
}

// hasher hashes keys with secret per-sketch seeds: an inline
// multiply-and-fold for short keys (as wyhash does, but with both operands
// seeded, so that no chosen word cancels the seed), maphash for the others.
type hasher struct {
	seed   maphash.Seed
	k0, k1 uint64
	k2, k3 uint64
}

func newHasher() hasher {
	return hasher{seed: maphash.MakeSeed(), k0: rand.Uint64(), k1: rand.Uint64(), k2: rand.Uint64(), k3: rand.Uint64()}
}

// prepare makes key's hkey in k.
func (hs *hasher) prepare(k *hkey, key string) {
	k.s, k.trunc = key, false
	if len(key) > MaxKeyLen {
		k.s, k.trunc = key[:MaxKeyLen], true
	}
	n := len(k.s)
	k.w0, k.w1 = 0, 0
	switch {
	case n == 0:
	case n < 4:
		k.w0 = uint64(k.s[0])<<16 | uint64(k.s[n>>1])<<8 | uint64(k.s[n-1])
	case n < 8:
		k.w0 = wordload.Load32(k.s, 0)<<32 | wordload.Load32(k.s, n-4)
	default:
		k.w0, k.w1 = wordload.Load64(k.s, 0), wordload.Load64(k.s, n-8)
	}
	if n > shortKey {
		k.h = maphash.String(hs.seed, k.s)
		return
	}
	hi, lo := bits.Mul64(k.w0^hs.k0, k.w1^hs.k1)
	hi, lo = bits.Mul64(lo^hs.k2^uint64(n), hi^hs.k3)
	k.h = hi ^ lo
}
