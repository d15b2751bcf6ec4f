package limiter

import (
	"testing"
	"time"
)

// base is the fake clock's origin: 2026-01-01 00:00:00 UTC, a whole number
// of days since the Unix epoch, so windows of 1ms to 1d start there.
var base = time.Unix(1_767_225_600, 0)

// op is what a test step does.
type op int

const (
	allow    op = iota // AllowAt (AllowScaledAt if scale is set)
	peek               // PeekAt: must take nothing
	refund             // Refund of what a decision at the same time took; nothing is checked
	giveBack           // Refund at at of what a decision at took took; nothing is checked
)

// tstep is one row of a step table: at the offset at from base, key (default
// "k") asks for cost units, and the decision must be exactly this.
type tstep struct {
	at    time.Duration
	cost  int64
	ok    bool
	rem   int64         // Quotas[0].Remaining
	reset time.Duration // Quotas[0].Reset
	retry time.Duration // RetryAfter
	delay time.Duration // Delay (leaky bucket)
	rems  []int64       // if set, Remaining of every limit instead of rem (reset unchecked)
	op    op
	scale float64 // AllowScaledAt with this scale if not 0
	key   string
	took  time.Duration // giveBack: the offset of the decision that took the units
}

// mustNew is New that fails the test on error.
func mustNew(t testing.TB, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return l
}

// run plays steps on l and reports every difference as "step %d: ...".
func run(t *testing.T, l *Limiter, steps []tstep) {
	t.Helper()
	for i, s := range steps {
		key := s.key
		if key == "" {
			key = "k"
		}
		now := base.Add(s.at)
		var d Decision
		switch s.op {
		case refund, giveBack:
			scale := s.scale
			if scale == 0 {
				scale = 1
			}
			took := now
			if s.op == giveBack {
				took = base.Add(s.took)
			}
			l.Refund(key, Taken{At: took, Cost: s.cost, Scale: scale}, now)
			continue
		case peek:
			if s.scale != 0 {
				d = l.PeekScaledAt(key, now, s.cost, s.scale)
			} else {
				d = l.PeekAt(key, now, s.cost)
			}
		default:
			if s.scale != 0 {
				d = l.AllowScaledAt(key, now, s.cost, s.scale)
			} else {
				d = l.AllowAt(key, now, s.cost)
			}
		}
		checkDecision(t, i, d, s)
	}
}

func checkDecision(t *testing.T, i int, d Decision, s tstep) {
	t.Helper()
	if d.Allowed != s.ok {
		t.Errorf("step %d: at %v cost %d: allowed = %v, want %v", i, s.at, s.cost, d.Allowed, s.ok)
	}
	if d.RetryAfter != s.retry {
		t.Errorf("step %d: at %v cost %d: RetryAfter = %v (%d), want %v (%d)", i, s.at, s.cost, d.RetryAfter, d.RetryAfter, s.retry, s.retry)
	}
	if d.Delay != s.delay {
		t.Errorf("step %d: at %v cost %d: Delay = %v, want %v", i, s.at, s.cost, d.Delay, s.delay)
	}
	if s.rems != nil {
		if d.Len != len(s.rems) {
			t.Fatalf("step %d: Len = %d, want %d", i, d.Len, len(s.rems))
		}
		for j, want := range s.rems {
			if got := d.Quotas[j].Remaining; got != want {
				t.Errorf("step %d: at %v cost %d: limit %d: Remaining = %d, want %d", i, s.at, s.cost, j, got, want)
			}
		}
		return
	}
	if got := d.Quotas[0].Remaining; got != s.rem {
		t.Errorf("step %d: at %v cost %d: Remaining = %d, want %d", i, s.at, s.cost, got, s.rem)
	}
	if got := d.Quotas[0].Reset; got != s.reset {
		t.Errorf("step %d: at %v cost %d: Reset = %v (%d), want %v (%d)", i, s.at, s.cost, got, got, s.reset, s.reset)
	}
}

// allAlgorithms lists the five algorithms, the default first.
var allAlgorithms = []Algorithm{SlidingWindow, FixedWindow, SlidingLog, TokenBucket, LeakyBucket}

// ms and ns keep tables short.
const (
	ms = time.Millisecond
	ns = time.Nanosecond
	s1 = time.Second
)
