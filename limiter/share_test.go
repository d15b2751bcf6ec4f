package limiter

import (
	"testing"
	"time"
)

func TestShares(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{100, time.Minute}}, Shares: true})
	if d, s := l.TakeDemand("k"); d != 0 || s != 1 || l.Contains("k") {
		t.Fatalf("unknown key: demand %d share %v", d, s)
	}
	l.SetShareAt("k", 0.5, base)
	if !l.Contains("k") {
		t.Fatal("SetShareAt did not create the key")
	}
	run(t, l, []tstep{
		{at: 0, cost: 10, ok: true, rem: 40, reset: time.Minute},
		{at: 0, cost: 45, ok: false, rem: 40, reset: time.Minute, retry: time.Minute},
		{at: 0, cost: 41, ok: false, rem: 40, reset: time.Minute, retry: time.Minute},
		{at: 0, cost: 1, ok: true, rem: 89, reset: time.Minute, scale: 2}, // scale × share
		{at: 0, cost: 5, ok: true, rem: 34, reset: time.Minute, op: peek}, // no demand
	})
	if d, s := l.TakeDemand("k"); d != 10+45+41+1 || s != 0.5 {
		t.Fatalf("TakeDemand = %d, %v; want 97, 0.5", d, s)
	}
	if d, s := l.TakeDemand("k"); d != 0 || s != 0.5 {
		t.Fatalf("TakeDemand again = %d, %v; want 0, 0.5", d, s)
	}
	l.SetShareAt("k", 0, base) // blocks
	run(t, l, []tstep{{at: 0, cost: 1, ok: false, rem: 0, reset: 0, retry: time.Minute}})
	l.SetShareAt("k", -1, base) // back to the default
	run(t, l, []tstep{{at: 0, cost: 1, ok: true, rem: 88, reset: time.Minute}})
	if _, s := l.TakeDemand("k"); s != 1 {
		t.Fatalf("share %v after reset, want 1", s)
	}

	// shares are kept to float32 precision, however small
	for _, c := range []struct {
		n     int64
		share float64
	}{{300, 2.0 / 3}, {1_000_000, 0.007}, {1000, 0.7}, {1e9, 1e-6}} {
		l := mustNew(t, Config{Limits: []Limit{{c.n, time.Minute}}, Shares: true})
		l.SetShareAt("k", c.share, base)
		want := int64(float64(c.n)*c.share + 0.5)
		if d := l.AllowAt("k", base, 0); d.Quotas[0].Remaining != want {
			t.Errorf("%d × share %v: Remaining %d, want %d", c.n, c.share, d.Quotas[0].Remaining, want)
		}
	}

	// a key with a share, or demand not yet taken, is not idle
	l = mustNew(t, Config{Limits: []Limit{{100, time.Minute}}, Shares: true})
	l.SetShareAt("s", 0.5, base)
	l.AllowAt("d", base, 1)
	if n := l.SweepAt(base.Add(time.Hour)); n != 0 {
		t.Fatalf("swept %d keys with a share or demand", n)
	}
	l.SetShareAt("s", -1, base)
	l.TakeDemand("d")
	if n := l.SweepAt(base.Add(time.Hour)); n != 2 {
		t.Fatalf("swept %d keys, want 2", n)
	}

	// without Config.Shares, nothing is kept
	l = mustNew(t, Config{Limits: []Limit{{100, time.Minute}}})
	l.SetShareAt("k", 0.5, base)
	if l.Contains("k") {
		t.Fatal("SetShareAt created a key without Shares")
	}
	l.AllowAt("k", base, 3)
	if d, s := l.TakeDemand("k"); d != 0 || s != 1 {
		t.Fatalf("TakeDemand without Shares = %d, %v", d, s)
	}
}

// UsedAt, with shares and without (an atomic table: lockfree.go).
func TestUsedAt(t *testing.T) {
	for i := range 8 {
		algo := []Algorithm{SlidingWindow, FixedWindow, SlidingLog, TokenBucket}[i%4]
		shares := i < 4
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{Count: 10, Window: s1}}, Shares: shares})
		if got := l.UsedAt("k", base); got != 0 {
			t.Errorf("%s: a new key used %d", algo, got)
		}
		for j := range 4 {
			if shares {
				l.AllowScaledAt("k", base, 1, 0.5)
			} else {
				l.AllowAt("k", base.Add(time.Duration(j)), 1) // the later ones lock-free
			}
		}
		scale := 1.0
		if shares {
			scale = 0.5
		}
		if got := l.UsedScaledAt("k", base.Add(ms), scale); got != 4 {
			t.Errorf("%s (shares %v): used %d after 4, want 4", algo, shares, got)
		}
		// a bucket's units at another scale: 4 units of 1/5 s at 0.5,
		// 7.99 of 1/10 s at 1 a millisecond on, rounded up; a window's
		// count the same
		want := int64(4)
		if algo == TokenBucket && shares {
			want = 8
		}
		if got := l.UsedAt("k", base.Add(ms)); got != want {
			t.Errorf("%s (shares %v): UsedAt %d after 4, want %d", algo, shares, got, want)
		}
	}
}

// RescaleAt keeps a bucket's units in use across a change of scale: a key
// of limit 30 a day that took 11 at a share of 11/30 holds 11 at a share
// of 29/30 (18 more fit, where without it the bucket stays empty), and
// under a cut back to 11/30 its 29 units are a debt: nothing fits until
// 19 have refilled at the smaller rate. A leaky bucket's queue likewise.
func TestRescaleAt(t *testing.T) {
	for _, algo := range []Algorithm{TokenBucket, LeakyBucket} {
		day := 24 * time.Hour
		cfg := Config{Algorithm: algo, Limits: []Limit{{Count: 30, Window: day}}, Shares: true}
		if algo == LeakyBucket {
			cfg.MaxDelay = day // a queue of a day: the units are the requests queued
		}
		l := mustNew(t, cfg)
		cold, hot := 11.0/30, 29.0/30
		took := func(at time.Time, scale float64) int {
			n := 0
			for l.AllowScaledAt("k", at, 1, scale).Allowed {
				n++
			}
			return n
		}
		if n := took(base, cold); n != 11 && algo == TokenBucket || n != 12 && algo == LeakyBucket {
			t.Fatalf("%s: %d at the cold share", algo, n)
		}
		if got := l.UsedScaledAt("k", base, cold); got != 11 && algo == TokenBucket {
			t.Errorf("%s: used %d at the cold share, want 11", algo, got)
		}
		l.RescaleAt("k", base, cold, hot)
		if got := l.UsedScaledAt("k", base, hot); got != 11 && algo == TokenBucket {
			t.Errorf("%s: used %d after the raise, want 11", algo, got)
		}
		if n := took(base, hot); n != 18 {
			t.Errorf("%s: %d more after the raise, want 18", algo, n)
		}
		l.RescaleAt("k", base, hot, cold)
		if n := took(base.Add(day*18/11), cold); algo == TokenBucket && n != 0 {
			t.Errorf("%s: %d after the cut, 18 units refilled, want 0", algo, n)
		}
		if n := took(base.Add(day*19/11+time.Second), cold); algo == TokenBucket && n != 1 {
			t.Errorf("%s: %d after the cut, 19 units refilled, want 1", algo, n)
		}
	}
	// without Shares, or at equal scales, nothing moves
	l := mustNew(t, Config{Algorithm: TokenBucket, Limits: []Limit{{Count: 10, Window: s1}}})
	l.AllowAt("k", base, 4)
	l.RescaleAt("k", base, 0.5, 1)
	if got := l.UsedAt("k", base); got != 4 {
		t.Errorf("without Shares: used %d after a rescale, want 4", got)
	}
}
