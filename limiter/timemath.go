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

// span is how long units take at n per w: ⌈units·w/n⌉ nanoseconds, at most
// maxSpan. Rounding up never lets a bucket admit more than its rate.
func span(units, w, n int64) int64 {
	if units <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(units), uint64(w))
	if hi >= uint64(n) {
		return maxSpan
	}
	q, r := bits.Div64(hi, lo, uint64(n))
	if r != 0 {
		q++
	}
	if q > maxSpan {
		return maxSpan
	}
	return int64(q)
}

// unitsIn is how many whole units fit in d at n per w: ⌊d·n/w⌋.
func unitsIn(d, w, n int64) int64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(n))
	if hi >= uint64(w) {
		return MaxCount
	}
	q, _ := bits.Div64(hi, lo, uint64(w))
	if q > MaxCount {
		return MaxCount
	}
	return int64(q)
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
