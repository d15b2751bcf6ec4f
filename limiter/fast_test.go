package limiter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The unit buckets' steps agree with tokenBucket's and leakyBucket's
// wherever they decide (they allow), on random states, times and costs,
// and decide whenever the general step allows with state left whole.
func TestUnitBucketMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	windows := []int64{int64(time.Second), int64(time.Minute), int64(time.Hour), 10, 1 << 40}
	for i := range 200000 {
		algo := TokenBucket
		if i%2 == 1 {
			algo = LeakyBucket
		}
		w := windows[rng.IntN(len(windows))]
		n := int64(1 + rng.IntN(1000))
		if rng.IntN(4) == 0 {
			n = min(1+w/int64(1+rng.IntN(50)), MaxCount) // a unit of a few ns
		}
		w = max(w/n, 1) * n // whole units
		capacity := rng.Int64N(2 * n)
		if algo == TokenBucket {
			capacity++
		}
		maxDelay := rng.Int64N(2 * w)
		ub := newUnitBucket(algo, n, w, capacity, maxDelay)
		if ub.unit == 0 {
			t.Fatalf("case %d: %d per %d: no unit bucket", i, n, w)
		}
		now := int64(1e18) + rng.Int64N(1e12)
		a := uint64(now + rng.Int64N(2*w+1) - w/2)
		cost := 1 + rng.Int64N(n)
		var fast, slow step
		var ok bool
		if algo == TokenBucket {
			ok = cost <= capacity && ub.token(&fast, a, now, w, n, cost)
			tokenBucket(&slow, a, 0, now, w, n, capacity, cost, false)
		} else {
			ok = ub.leaky(&fast, a, now, w, n, cost)
			leakyBucket(&slow, a, 0, now, w, n, capacity, maxDelay, cost)
		}
		if ok != slow.ok || ok && fast != slow {
			t.Fatalf("case %d: %s %d per %d, capacity %d, delay %d, a=%d now=%d cost %d:\nfast %v %+v\nslow %+v",
				i, algo, n, w, capacity, maxDelay, a, now, cost, ok, fast, slow)
		}
	}
}

// A unit bucket needs a whole unit and a window within maxSpan.
func TestNewUnitBucket(t *testing.T) {
	for i, tc := range []struct {
		n, w int64
		unit uint64
	}{
		{100, int64(time.Minute), 600_000_000},
		{3, int64(10 * time.Second), 0},
		{1, maxSpan, maxSpan},
		{1, maxSpan + 1, 0},
	} {
		if got := newUnitBucket(TokenBucket, tc.n, tc.w, tc.n, 0).unit; got != tc.unit {
			t.Errorf("Test %d: %d per %d: unit %d, want %d", i, tc.n, tc.w, got, tc.unit)
		}
	}
}

// windowStarts is alignDown, whatever the order of the times it is asked.
func TestWindowStartsMatchAlignDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ws := make(windowStarts, 1)
	w := int64(time.Minute)
	for i := range 100000 {
		now := rng.Int64N(10*w) - 5*w
		if got, want := ws.at(0, now, w), alignDown(now, w); got != want {
			t.Fatalf("case %d: at(%d) = %d, want %d", i, now, got, want)
		}
	}
}

// quo is the quotient, around the multiples of the unit and past 2^53.
func TestUnitBucketQuo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 100000 {
		u := uint64(1 + rng.Int64N(1<<uint(1+i%40)))
		ub := unitBucket{unit: u, inv: 1 / float64(u)}
		x := rng.Uint64N(1 << 62)
		if i%3 == 0 {
			x = (x%(1<<53))/u*u - uint64(i%2) // a multiple, or one under it
		}
		if got, want := ub.quo(x), x/u; got != want {
			t.Fatalf("case %d: quo(%d) by %d = %d, want %d", i, x, u, got, want)
		}
	}
}
