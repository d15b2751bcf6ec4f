//go:build !limiterstats

package limiter

// fastCount counts one outcome of allowFast or of the lock that follows
// it: a no-op but under the build tag limiterstats (faststats_on.go).
func fastCount(fastOutcome) {}

// lockShard locks s for a decision.
func lockShard(s *shard) { s.mu.Lock() }

// takeFastCounts is the counts since the last call, and the time waited
// for the lock: none in this build.
func takeFastCounts() (n [fastOutcomes]uint64, waitNs uint64) { return n, 0 }
