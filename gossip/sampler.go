package gossip

import (
	"sync"
	"time"
)

// sampler bounds how many log lines of each class are written: the first
// line of a class, then at most one per interval, so that a flood of
// junk on the gossip port writes a few lines a second, not one a packet.
// A line written after some were held back is told how many, to say so.
//
// Classes are a small fixed set (the drop reasons, and "stream"); past
// maxSampled classes, new ones share one. Time is an argument: a time
// before the last line written of a class (a clock set back) restarts
// the class's interval from it, so lines are held back for at most one
// interval, never until the clock catches up. A sampler is safe for
// concurrent use.
type sampler struct {
	interval time.Duration

	mu      sync.Mutex
	classes map[string]*sampledClass
}

// sampledClass is what a sampler knows of one class.
type sampledClass struct {
	last time.Time // when its last line was written
	held uint64    // lines held back since then
}

// maxSampled bounds the classes a sampler keeps apart.
const maxSampled = 32

// newSampler returns a sampler that writes at most one line of a class
// per interval.
func newSampler(interval time.Duration) *sampler {
	return &sampler{interval: interval, classes: make(map[string]*sampledClass)}
}

// allow reports whether a line of class at now is to be written, and if
// so how many lines of the class were held back since the last one
// written.
func (s *sampler) allow(class string, now time.Time) (write bool, held uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.classes[class]
	if c == nil {
		if len(s.classes) >= maxSampled {
			class = ""
			c = s.classes[class]
		}
		if c == nil {
			s.classes[class] = &sampledClass{last: now}
			return true, 0
		}
	}
	switch {
	case now.Before(c.last):
		c.last = now
	case now.Sub(c.last) >= s.interval:
		held, c.held, c.last = c.held, 0, now
		return true, held
	}
	c.held++
	return false, 0
}
