//go:build limiterstats

package limiter

import "sync/atomic"

// Under the build tag limiterstats, allowFast counts why it left a
// decision to the lock, and the locked path whether it had to wait for it
// (fastOutcome): for profiling a hot key under contention,
//
//	go test -tags limiterstats -run '^$' -bench HotKey ./limiter
//
// reports them per decision. A normal build counts nothing
// (faststats.go).

// fastCounts are the counts since the last takeFastCounts, by outcome.
var fastCounts [fastOutcomes]atomic.Uint64

// fastCount counts one outcome.
func fastCount(o fastOutcome) { fastCounts[o].Add(1) }

// lockShard locks s for a decision, counting whether it had to wait.
func lockShard(s *shard) {
	if !s.mu.TryLock() {
		fastCount(lockWaited)
		s.mu.Lock()
	}
}

// takeFastCounts is the counts since the last call, which it resets.
func takeFastCounts() (n [fastOutcomes]uint64) {
	for i := range n {
		n[i] = fastCounts[i].Swap(0)
	}
	return n
}
