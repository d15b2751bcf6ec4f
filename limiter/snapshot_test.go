package limiter

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// restored is a new Limiter for cfg holding the keys of the snapshots
// parts, restored at now.
func restored(t testing.TB, cfg Config, now time.Time, parts ...[]byte) *Limiter {
	t.Helper()
	r := NewRestore(now)
	for i, p := range parts {
		if err := r.Add(p); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	l := mustNew(t, cfg)
	if _, err := r.Into(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// passes is how many of n requests of one unit on key pass at now.
func passes(l *Limiter, key string, now time.Time, n int) int {
	ok := 0
	for range n {
		if l.AllowAt(key, now, 1).Allowed {
			ok++
		}
	}
	return ok
}

// full is a full snapshot of l at now.
func full(l *Limiter, now time.Time) []byte {
	b, _ := l.AppendSnapshot(nil, now, true)
	return b
}

// Across a restart each algorithm goes on where it stopped: 4 of 5 used,
// then 1 more passes, whatever the algorithm, down for a minute of a day.
func TestSnapshotRestart(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := Config{Algorithm: algo, Limits: []Limit{{5, 24 * time.Hour}}}
			if algo == LeakyBucket {
				cfg.Burst, cfg.MaxDelay = 4, 24*time.Hour
			}
			l := mustNew(t, cfg)
			if got := passes(l, "k", base, 4); got != 4 {
				t.Fatalf("before: %d passed, want 4", got)
			}
			passes(l, "other", base, 1)
			m := restored(t, cfg, base.Add(time.Minute), full(l, base.Add(time.Second)))
			if m.Len() != 2 {
				t.Errorf("%d keys restored, want 2", m.Len())
			}
			if got := passes(m, "k", base.Add(time.Minute), 5); got != 1 {
				t.Errorf("after: %d passed, want 1 (9 in a day against 5 if it starts afresh)", got)
			}
		})
	}
}

// A token bucket refills for the time the process was down, and no more:
// 5 per 10 s, emptied at base, restored 4 s later, holds 2 units.
func TestSnapshotBucketRefills(t *testing.T) {
	cfg := Config{Algorithm: TokenBucket, Limits: []Limit{{5, 10 * time.Second}}}
	l := mustNew(t, cfg)
	passes(l, "k", base, 5)
	at := base.Add(4 * time.Second)
	m := restored(t, cfg, at, full(l, base))
	if got := passes(m, "k", at, 5); got != 2 {
		t.Errorf("%d passed 4 s after, want 2", got)
	}
}

// State older than its windows is dropped at restore; a clock that went
// backwards gives nothing back.
func TestSnapshotTime(t *testing.T) {
	cfg := Config{Algorithm: FixedWindow, Limits: []Limit{{5, time.Second}}}
	l := mustNew(t, cfg)
	passes(l, "k", base, 5)
	snap := full(l, base)
	if m := restored(t, cfg, base.Add(3*time.Second), snap); m.Len() != 0 {
		t.Errorf("%d keys restored 3 windows later, want 0", m.Len())
	}
	back := base.Add(-time.Hour)
	m := restored(t, cfg, back, snap)
	if got := passes(m, "k", back, 5); got != 0 {
		t.Errorf("clock an hour back: %d passed, want 0", got)
	}
}

// A limit changed while down keeps the units used, as a reload does: the
// same layout keeps them as they are (5/1d → 10/1d: 4 used, 6 left); a
// new layout carries the limits of the same window (a 1h limit added: its
// count starts afresh, the day's carries).
func TestSnapshotChangedLimit(t *testing.T) {
	cfg := Config{Limits: []Limit{{5, 24 * time.Hour}}}
	l := mustNew(t, cfg)
	passes(l, "k", base, 4)
	snap := full(l, base)
	at := base.Add(time.Minute)
	for i, tc := range []struct {
		limits []Limit
		want   int
	}{
		{[]Limit{{10, 24 * time.Hour}}, 6},
		{[]Limit{{3, 24 * time.Hour}}, 0},
		{[]Limit{{5, 24 * time.Hour}, {100, time.Hour}}, 1},
		{[]Limit{{5, time.Hour}}, 1}, // another window, same layout: kept as Reconfigure keeps it
	} {
		m := restored(t, Config{Limits: tc.limits}, at, snap)
		if got := passes(m, "k", at, 20); got != tc.want {
			t.Errorf("Test %d (%v): %d passed, want %d", i, tc.limits, got, tc.want)
		}
	}
}

// Deltas hold the keys changed since the snapshot before, and the keys
// deleted; none is written while nothing changes.
func TestSnapshotDeltas(t *testing.T) {
	for _, algo := range allAlgorithms {
		t.Run(string(algo), func(t *testing.T) {
			cfg := Config{Algorithm: algo, Limits: []Limit{{5, time.Hour}}}
			if algo == LeakyBucket {
				cfg.Burst, cfg.MaxDelay = 4, time.Hour
			}
			l := mustNew(t, cfg)
			for i := range 100 {
				passes(l, fmt.Sprint("k", i), base, 2)
			}
			snaps := [][]byte{full(l, base)}
			b, st := l.AppendSnapshot(nil, base, false)
			if !st.Empty() {
				t.Fatalf("delta with no change: %+v", st)
			}
			passes(l, "k1", base, 1) // a known key: the lock-free path where there is one
			passes(l, "new", base, 3)
			l.Delete("k2")
			b, st = l.AppendSnapshot(nil, base, false)
			if st.Keys != 2 || st.Deleted != 1 {
				t.Fatalf("delta: %+v, want 2 keys, 1 deleted", st)
			}
			snaps = append(snaps, b)
			m := restored(t, cfg, base, snaps...)
			if m.Len() != 100 || m.Contains("k2") {
				t.Errorf("%d keys, k2 held %v: want 100, not k2", m.Len(), m.Contains("k2"))
			}
			for key, want := range map[string]int{"k1": 2, "new": 2, "k3": 3, "k2": 5} {
				if got := passes(m, key, base, 10); got != want {
					t.Errorf("%s: %d passed, want %d", key, got, want)
				}
			}
		})
	}
}

// Restoring is bounded by the new limiter's MaxKeys.
func TestSnapshotMaxKeys(t *testing.T) {
	cfg := Config{Limits: []Limit{{5, time.Hour}}}
	l := mustNew(t, cfg)
	for i := range 1000 {
		passes(l, fmt.Sprint(i), base, 1)
	}
	cfg.MaxKeys = 100
	if m := restored(t, cfg, base, full(l, base)); m.Len() != 100 {
		t.Errorf("%d keys restored, want 100", m.Len())
	}
}

// A cluster's share is relearnt, not restored; the usage is.
func TestSnapshotShares(t *testing.T) {
	cfg := Config{Limits: []Limit{{10, time.Hour}}, Shares: true}
	l := mustNew(t, cfg)
	l.SetShareAt("k", 0.5, base)
	passes(l, "k", base, 5)
	m := restored(t, cfg, base, full(l, base))
	if _, share := m.TakeDemand("k"); share != 1 {
		t.Errorf("share %v restored, want 1 (unset)", share)
	}
	if got := passes(m, "k", base, 10); got != 5 {
		t.Errorf("%d passed, want 5", got)
	}
}

// Bad snapshots are refused with ErrSnapshot and change nothing.
func TestSnapshotBad(t *testing.T) {
	cfg := Config{Limits: []Limit{{5, time.Hour}}}
	l := mustNew(t, cfg)
	passes(l, "k", base, 3)
	good := full(l, base)
	delta, _ := l.AppendSnapshot(nil, base, false)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	version := append([]byte(nil), good...)
	version[4] = 9
	blocks := mustBlocks(t, []time.Duration{time.Minute}, 0, 0).AppendSnapshot(nil, base)
	for i, data := range [][]byte{nil, good[:len(good)-1], good[:10], flipped, version, []byte("garbage garbage garbage"), delta, blocks} {
		r := NewRestore(base)
		if err := r.Add(data); !errors.Is(err, ErrSnapshot) {
			t.Errorf("Test %d: %v, want ErrSnapshot", i, err)
		}
		if _, err := r.Into(mustNew(t, cfg)); err == nil {
			t.Errorf("Test %d: Into without a full snapshot succeeded", i)
		}
	}
	r := NewRestore(base)
	if err := r.Add(good); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(good); !errors.Is(err, ErrSnapshot) {
		t.Errorf("a second full snapshot: %v", err)
	}
	used := mustNew(t, cfg)
	passes(used, "x", base, 1)
	if _, err := r.Into(used); err == nil {
		t.Error("Into a limiter holding keys succeeded")
	}
}

// A block keeps its end and its offences across a restart, and the next
// one escalates.
func TestBlocksSnapshot(t *testing.T) {
	ds := []time.Duration{time.Minute, time.Hour}
	b := mustBlocks(t, ds, 0, 0)
	b.OffendAt("k", base)
	before := b.Changes()
	snap := b.AppendSnapshot(nil, base)
	at := base.Add(30 * time.Second)
	r := mustBlocks(t, ds, 0, 0)
	if n, err := r.RestoreSnapshot(snap, at); n != 1 || err != nil {
		t.Fatalf("restored %d, %v", n, err)
	}
	if until, ok := r.BlockedAt("k", at); !ok || !until.Equal(base.Add(time.Minute)) {
		t.Errorf("blocked %v until %v, want until %v", ok, until, base.Add(time.Minute))
	}
	later := base.Add(2 * time.Minute)
	if until, n, _ := r.OffendAt("k", later); n != 2 || !until.Equal(later.Add(time.Hour)) {
		t.Errorf("next block: offence %d until %v, want 2, an hour", n, until)
	}
	if b.Changes() != before {
		t.Error("a snapshot changed the blocks")
	}
	gone := mustBlocks(t, ds, 0, 0)
	if n, _ := gone.RestoreSnapshot(snap, base.Add(25*time.Hour)); n != 0 {
		t.Errorf("%d blocks restored after the reset duration, want 0", n)
	}
	if _, err := gone.RestoreSnapshot(snap[:len(snap)-2], base); !errors.Is(err, ErrSnapshot) {
		t.Errorf("truncated: %v", err)
	}
}
