package limiter

import (
	"math"
	"testing"
	"time"
)

// The fuzz targets play a random sequence of requests on a Limiter and
// check it against a reference model kept here: no panic, Remaining never
// negative, RetryAfter set exactly when denied, PeekAt agreeing with the
// AllowAt after it, and for the exact algorithms no more admitted than
// the limit (plus the burst) in any window.
//
// The input's first byte picks the configuration (a burst, a second
// limit); then every 3 bytes are one request:
//
//	b0: bits 0-1 the key (of 4); bit 2: refund the key's last admitted
//	    request first; bits 4-7: ns added to the time step
//	b1: the time step, int8 × W/16: time may go back
//	b2: the cost: b2%16 − 2 (so -2 to 13; the limit is 7), or MaxInt64 if 255

const (
	fuzzN = 7 // units per fuzzW: W/N is not a whole number of ns
	fuzzW = int64(time.Second)
)

func FuzzFixedWindow(f *testing.F)   { fuzzAlgorithm(f, FixedWindow) }
func FuzzSlidingWindow(f *testing.F) { fuzzAlgorithm(f, SlidingWindow) }
func FuzzSlidingLog(f *testing.F)    { fuzzAlgorithm(f, SlidingLog) }
func FuzzTokenBucket(f *testing.F)   { fuzzAlgorithm(f, TokenBucket) }
func FuzzLeakyBucket(f *testing.F)   { fuzzAlgorithm(f, LeakyBucket) }

// admission is one admitted request in the model: when it counts, and how
// many units.
type admission struct {
	at, units int64
}

// fuzzKey is the model's view of one key.
type fuzzKey struct {
	hist   []admission // everything admitted and not refunded
	hi     int64       // the latest time an admitted request was made
	last   int         // index in hist of the last admission, -1 if refunded
	lastAt int64       // its time
}

func fuzzAlgorithm(f *testing.F, algo Algorithm) {
	f.Add([]byte{0, 0, 0, 3, 0, 0, 3, 0, 0, 3, 0, 0, 3, 0, 16, 3})
	f.Add([]byte{1, 0, 1, 9, 0, 1, 9, 4, 0, 9, 0, 8, 9, 1, 0, 3, 1, 248, 3})
	f.Add([]byte{2, 0, 2, 15, 0x10, 15, 3, 0xf0, 255, 3, 4, 1, 3, 4, 0, 2, 0, 0, 1})
	f.Add([]byte{3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1, 3, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 601 { // 200 requests: short inputs fuzz faster
			return
		}
		cfg := Config{Algorithm: algo, Limits: []Limit{{fuzzN, time.Duration(fuzzW)}}, MaxKeys: 16}
		if data[0]&1 != 0 {
			cfg.Burst = 3
			if algo == TokenBucket {
				cfg.Burst = 12 // above the limit
			}
		}
		if data[0]&2 != 0 && algo != LeakyBucket {
			cfg.Limits = append(cfg.Limits, Limit{20, 10 * time.Duration(fuzzW)})
		}
		if algo == LeakyBucket && data[0]&2 != 0 {
			cfg.MaxDelay = 450 * time.Millisecond
		}
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		keys := [4]string{"a", "b", "c", "d"}
		var model [4]fuzzKey
		for i := range model {
			model[i].last = -1
		}
		now := base.UnixNano()
		for i := 1; i+3 <= len(data); i += 3 {
			b0, b1, b2 := data[i], data[i+1], data[i+2]
			k := int(b0 & 3)
			m := &model[k]
			if b0&4 != 0 && m.last >= 0 {
				u := m.hist[m.last].units
				l.Refund(keys[k], Taken{At: time.Unix(0, m.lastAt), Cost: u, Scale: 1}, time.Unix(0, m.lastAt))
				m.hist = append(m.hist[:m.last], m.hist[m.last+1:]...)
				m.last = -1
			}
			now += int64(int8(b1))*(fuzzW/16) + int64(b0>>4)
			cost := int64(b2%16) - 2
			if b2 == 255 {
				cost = math.MaxInt64
			}
			at := time.Unix(0, now)
			p := l.PeekAt(keys[k], at, cost)
			d := l.AllowAt(keys[k], at, cost)
			if p != d {
				t.Fatalf("op %d: PeekAt %+v, AllowAt %+v", i/3, p, d)
			}
			checkSane(t, i/3, cfg, d, cost)
			if !d.Allowed || cost <= 0 {
				continue
			}
			// when the limiter counts the request: never before the latest
			// admitted one, even if refunded (it may have closed a window or
			// expired events)
			eff := max(now, m.hi)
			m.hi = max(m.hi, now)
			m.hist = append(m.hist, admission{eff, cost})
			m.last, m.lastAt = len(m.hist)-1, now
			checkModel(t, i/3, cfg, m.hist)
		}
	})
}

// checkSane checks what holds of every decision.
func checkSane(t *testing.T, op int, cfg Config, d Decision, cost int64) {
	t.Helper()
	if d.Len != len(cfg.Limits) {
		t.Fatalf("op %d: Len %d", op, d.Len)
	}
	if d.Allowed != (d.RetryAfter == 0) || d.RetryAfter < 0 {
		t.Fatalf("op %d: allowed %v with RetryAfter %v", op, d.Allowed, d.RetryAfter)
	}
	if cost <= 0 && !d.Allowed {
		t.Fatalf("op %d: cost %d denied", op, cost)
	}
	if cost > fuzzN+cfg.Burst && d.Allowed {
		t.Fatalf("op %d: cost %d allowed", op, cost)
	}
	if d.Delay < 0 || cfg.Algorithm != LeakyBucket && d.Delay != 0 || !d.Allowed && d.Delay != 0 {
		t.Fatalf("op %d: Delay %v", op, d.Delay)
	}
	if cfg.Algorithm == LeakyBucket {
		maxDelay := cfg.MaxDelay
		if maxDelay == 0 {
			maxDelay = DefaultMaxDelay
		}
		if d.Delay > maxDelay {
			t.Fatalf("op %d: Delay %v beyond MaxDelay %v", op, d.Delay, maxDelay)
		}
		if cfg.Burst > 0 && d.Delay > time.Duration(ceilDiv(cfg.Burst*fuzzW, fuzzN)) {
			t.Fatalf("op %d: Delay %v beyond a queue of %d", op, d.Delay, cfg.Burst)
		}
	}
	for i, q := range d.Quotas[:d.Len] {
		if q.Remaining < 0 || q.Reset < 0 {
			t.Fatalf("op %d: limit %d: Remaining %d, Reset %v", op, i, q.Remaining, q.Reset)
		}
		if q.Effective <= 0 {
			t.Fatalf("op %d: limit %d: Effective %v", op, i, q.Effective)
		}
		if !d.Allowed && cost == 1 && q.Remaining == 0 && d.RetryAfter < q.Effective {
			t.Fatalf("op %d: limit %d: RetryAfter %v before the effective window's end %v", op, i, d.RetryAfter, q.Effective)
		}
		if q.Limit != cfg.Limits[i].Count || q.Window != cfg.Limits[i].Window {
			t.Fatalf("op %d: limit %d reported as %d/%v", op, i, q.Limit, q.Window)
		}
		if cfg.Algorithm != LeakyBucket && q.Remaining > max(q.Limit, cfg.Burst) {
			t.Fatalf("op %d: limit %d: Remaining %d above the limit", op, i, q.Remaining)
		}
	}
}

// checkModel checks that the admissions of one key, the last one just
// made, keep to every limit. They are in order of the times they count at.
func checkModel(t *testing.T, op int, cfg Config, hist []admission) {
	t.Helper()
	last := hist[len(hist)-1]
	for li, lim := range cfg.Limits {
		n, w := lim.Count, int64(lim.Window)
		switch cfg.Algorithm {
		case FixedWindow: // per epoch-aligned window
			sum := int64(0)
			for i := len(hist) - 1; i >= 0 && hist[i].at >= alignDown(last.at, w); i-- {
				sum += hist[i].units
			}
			if sum > n {
				t.Fatalf("op %d: limit %d: %d units in the window at %d", op, li, sum, alignDown(last.at, w))
			}
		case SlidingLog: // in any window (t−W, t]
			sum := int64(0)
			for i := len(hist) - 1; i >= 0 && hist[i].at > last.at-w; i-- {
				sum += hist[i].units
			}
			if sum > n {
				t.Fatalf("op %d: limit %d: %d units in (t−W, t] at %d", op, li, sum, last.at)
			}
		case TokenBucket:
			capacity := n
			if li == 0 && cfg.Burst > 0 {
				capacity = cfg.Burst
			}
			checkGCRA(t, op, hist, capacity*w, n, w, 0)
		case LeakyBucket:
			// queued ahead at most min(depth, MaxDelay) units' worth, plus the request
			maxDelay := cfg.MaxDelay
			if maxDelay == 0 {
				maxDelay = DefaultMaxDelay
			}
			tol := int64(maxDelay) * n
			if cfg.Burst > 0 {
				tol = min(tol, cfg.Burst*w)
			}
			checkGCRA(t, op, hist, tol, n, w, last.units*w)
		}
	}
	if cfg.Burst > 0 && cfg.Algorithm != TokenBucket && cfg.Algorithm != LeakyBucket {
		w := int64(cfg.Limits[0].Window)
		checkGCRA(t, op, hist, cfg.Burst*w, cfg.Limits[0].Count, w, 0)
	}
}

// checkGCRA checks that the units admitted between any earlier admission
// and the last one fit a bucket of tolerance tol (in n-ths of a ns, plus
// extra) refilled at n per w: units×w ≤ tol + extra + (t−s)×n.
func checkGCRA(t *testing.T, op int, hist []admission, tol, n, w, extra int64) {
	t.Helper()
	last := hist[len(hist)-1]
	sum := int64(0)
	for i := len(hist) - 1; i >= 0; i-- {
		a := hist[i]
		sum += a.units
		if sum*w > tol+extra+(last.at-a.at)*n {
			t.Fatalf("op %d: %d units in [%d, %d]: more than the bucket holds", op, sum, a.at, last.at)
		}
	}
}
