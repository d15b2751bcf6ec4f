//go:build limiterstats

package limiter

import (
	"sync/atomic"
	"time"
)

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

// lockWaitNs is the time the locked path waited for a lock it found
// taken, in ns, since the last takeFastCounts.
var lockWaitNs atomic.Uint64

// fastCount counts one outcome.
func fastCount(o fastOutcome) { fastCounts[o].Add(1) }

// lockShard locks s for a decision, counting whether it had to wait.
func lockShard(s *shard) {
	if !s.mu.TryLock() {
		fastCount(lockWaited)
		t := time.Now()
		s.mu.Lock()
		lockWaitNs.Add(uint64(time.Since(t)))
	}
}

// takeFastCounts is the counts since the last call, and the time waited
// for the lock, which it resets.
func takeFastCounts() (n [fastOutcomes]uint64, waitNs uint64) {
	for i := range n {
		n[i] = fastCounts[i].Swap(0)
	}
	return n, lockWaitNs.Swap(0)
}
