package limiter

import "math/bits"

// maxSpan bounds every duration computed from counts, so that now plus a
// span never overflows an int64 of nanoseconds.
const maxSpan = 1 << 62

// alignDown is the start of the window of length w that holds t, windows
// being aligned to the Unix epoch.
func alignDown(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return t - r
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// u128 is an unsigned 128-bit integer: products of counts and durations,
// which overflow 64 bits, are kept exactly.
type u128 struct{ hi, lo uint64 }

// mul is a×b.
func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

// add is x+y (no overflow: operands stay far below 2^127).
func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return u128{x.hi + y.hi + c, lo}
}

// sub is x−y, or 0 if y > x.
func (x u128) sub(y u128) u128 {
	if x.less(y) {
		return u128{}
	}
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

func (x u128) less(y u128) bool { return x.hi < y.hi || x.hi == y.hi && x.lo < y.lo }

func (x u128) isZero() bool { return x.hi == 0 && x.lo == 0 }

func min128(x, y u128) u128 {
	if y.less(x) {
		return y
	}
	return x
}

// divmod is x/d and x%d, the quotient at most maxSpan (d > 0).
func (x u128) divmod(d uint64) (int64, uint64) {
	if x.hi >= d {
		return maxSpan, 0
	}
	q, r := bits.Div64(x.hi, x.lo, d)
	if q > maxSpan {
		return maxSpan, r
	}
	return int64(q), r
}

// div is ⌊x/d⌋, at most maxSpan.
func (x u128) div(d uint64) int64 {
	q, _ := x.divmod(d)
	return q
}

// ceil is ⌈x/d⌉, at most maxSpan.
func (x u128) ceil(d uint64) int64 {
	q, r := x.divmod(d)
	if r != 0 && q < maxSpan {
		q++
	}
	return q
}
