package gossip

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// samplerStep is one line offered to a sampler: at t0+at, of class; the
// sampler must answer write and held.
type samplerStep struct {
	at    time.Duration
	class string
	write bool
	held  uint64
}

func runSampler(t *testing.T, s *sampler, steps []samplerStep) {
	t.Helper()
	for i, st := range steps {
		write, held := s.allow(st.class, t0.Add(st.at))
		if write != st.write || held != st.held {
			t.Errorf("Test %d: %s at %v: write %v, held %d; want %v, %d", i, st.class, st.at, write, held, st.write, st.held)
		}
	}
}

func TestSampler(t *testing.T) {
	runSampler(t, newSampler(time.Second), []samplerStep{
		{0, "label", true, 0}, // the first of a class is written
		{0, "label", false, 0},
		{500 * time.Millisecond, "label", false, 0},
		{999999999, "label", false, 0},
		{time.Second, "label", true, 3},   // an interval later, with the 3 held back
		{time.Second, "decrypt", true, 0}, // classes are apart
		{time.Second, "decrypt", false, 0},
		{1500 * time.Millisecond, "label", false, 0},
		{2 * time.Second, "decrypt", true, 1},
		{2 * time.Second, "label", true, 1},
		{10 * time.Second, "label", true, 0}, // a quiet class writes its next line at once
	})
}

func TestSamplerJumpBackwards(t *testing.T) {
	runSampler(t, newSampler(time.Second), []samplerStep{
		{time.Hour, "label", true, 0},
		{time.Hour + time.Second, "label", true, 0},
		{0, "label", false, 0}, // the clock set back an hour: held back for one interval from there,
		{999 * time.Millisecond, "label", false, 0},
		{time.Second, "label", true, 2}, // not for an hour
		{time.Second, "label", false, 0},
		{2 * time.Second, "label", true, 1},
	})
}

// TestSamplerBounds: a flood of 3 classes, a line every 100 µs each for
// 10 s: at most one line per class per second is written (plus the
// first), and every line held back is told of by the next written one.
func TestSamplerBounds(t *testing.T) {
	s := newSampler(time.Second)
	classes := []string{"label", "decrypt", "stream"}
	written := make(map[string]uint64)
	told := make(map[string]uint64)
	const step, lines = 100 * time.Microsecond, 100000
	for i := range lines {
		for _, c := range classes {
			if write, held := s.allow(c, t0.Add(time.Duration(i)*step)); write {
				written[c]++
				told[c] += held
			}
		}
	}
	for _, c := range classes {
		if written[c] > 11 {
			t.Errorf("%s: %d lines written in 10 s, want at most 11", c, written[c])
		}
		// the lines after the last written one are still held
		if last := lines - written[c] - told[c]; last >= uint64(time.Second/step) {
			t.Errorf("%s: %d written, %d told of, %d of %d unaccounted for", c, written[c], told[c], last, lines)
		}
	}
}

// TestSamplerClasses: the classes a sampler keeps are bounded, whatever
// it is given.
func TestSamplerClasses(t *testing.T) {
	s := newSampler(time.Second)
	written := 0
	for i := range 1000 {
		if write, _ := s.allow(fmt.Sprint("class-", i), t0); write {
			written++
		}
	}
	if len(s.classes) > maxSampled+1 {
		t.Errorf("%d classes kept, want at most %d", len(s.classes), maxSampled+1)
	}
	if written != maxSampled+1 {
		t.Errorf("%d lines of 1000 classes written at one instant, want %d: the first of each class kept, and one of the rest", written, maxSampled+1)
	}
}

func BenchmarkSampler(b *testing.B) {
	s := newSampler(time.Second)
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		for pb.Next() {
			now = now.Add(time.Microsecond)
			s.allow("label", now)
		}
	})
}
