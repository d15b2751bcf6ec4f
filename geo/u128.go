package geo

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// u128 is an address of the database's search tree as a 128-bit number:
// an IPv6 address, or an IPv4 address a.b.c.d as ::a.b.c.d, where the tree
// keeps IPv4 networks (::/96).
type u128 struct{ hi, lo uint64 }

// maxU128 is the last address, ffff:...:ffff.
var maxU128 = u128{^uint64(0), ^uint64(0)}

// lastIPv4 is the last address of the IPv4 part of the tree, ::255.255.255.255.
var lastIPv4 = u128{0, 1<<32 - 1}

// u128From returns addr as a tree address: IPv4 addresses as ::a.b.c.d.
func u128From(addr netip.Addr) u128 {
	if addr.Is4() {
		a := addr.As4()
		return u128{0, uint64(binary.BigEndian.Uint32(a[:]))}
	}
	a := addr.As16()
	return u128{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

// addr returns a as an IPv6 address.
func (a u128) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b)
}

func (a u128) less(b u128) bool {
	return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo)
}

// inc returns a+1, and false if a is the last address.
func (a u128) inc() (u128, bool) {
	lo, carry := bits.Add64(a.lo, 1, 0)
	hi, over := bits.Add64(a.hi, 0, carry)
	return u128{hi, lo}, over == 0
}

// dec returns a-1; a must not be 0.
func (a u128) dec() u128 {
	lo, borrow := bits.Sub64(a.lo, 1, 0)
	return u128{a.hi - borrow, lo}
}

// hostMask returns the low 128-n bits set: the host part of a /n prefix.
func hostMask(n int) u128 {
	switch {
	case n <= 0:
		return maxU128
	case n < 64:
		return u128{^uint64(0) >> n, ^uint64(0)}
	case n < 128:
		return u128{0, ^uint64(0) >> (n - 64)}
	}
	return u128{}
}

func (a u128) or(b u128) u128 { return u128{a.hi | b.hi, a.lo | b.lo} }

// blockBits returns the shortest prefix length n such that the block a/n
// starts at a and ends at or before last (a <= last): the largest aligned
// block of addresses that begins at a and fits in [a, last].
func blockBits(a, last u128) int {
	n := 128 - trailingZeros(a) // no larger than a's alignment allows
	for last.less(a.or(hostMask(n))) {
		n++
	}
	return n
}

// trailingZeros counts the zero bits at the low end of a, 128 for 0.
func trailingZeros(a u128) int {
	if a.lo != 0 {
		return bits.TrailingZeros64(a.lo)
	}
	return 64 + bits.TrailingZeros64(a.hi)
}
