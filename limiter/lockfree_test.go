package limiter

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lock-free path is exact while the table moves under it: 8
// goroutines on a few hot keys of one shard, while others add keys (the
// table doubles), delete them (removals shift the hot keys back), sweep,
// and reconfigure. Every hot key admits exactly its limit, and under
// -race no access goes unsynchronised. With a bound below the keys, the
// churn evicts too: a hot key evicted starts afresh, so it admits at
// least its limit.
func TestLockFreeUnderChurn(t *testing.T) {
	for _, tc := range []struct {
		algo    Algorithm
		maxKeys int
	}{
		{TokenBucket, 1024}, {LeakyBucket, 1024}, {SlidingWindow, 1024}, {FixedWindow, 1024},
		{TokenBucket, 256}, {LeakyBucket, 256}, {SlidingWindow, 256}, {FixedWindow, 256},
	} {
		algo := tc.algo
		const limit, hot = 20_000, 4
		cfg := Config{Algorithm: algo, Limits: []Limit{{limit, time.Hour}}, MaxKeys: tc.maxKeys} // one shard
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = limit-1, time.Hour
		}
		l := mustNew(t, cfg)
		if l.shards[0].table.cw == 0 || len(l.shards) != 1 {
			t.Fatalf("%s: not one atomic table", algo)
		}
		var allowed [hot]atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 2 * limit * hot / 8 { // twice the limit on each key
					k := (i + g) % hot
					if l.AllowAt("hot"+strconv.Itoa(k), base, 1).Allowed {
						allowed[k].Add(1)
					}
				}
			})
		}
		stop := make(chan struct{})
		var side sync.WaitGroup
		for g := range 2 {
			side.Go(func() {
				for round := 0; ; round++ {
					select {
					case <-stop:
						return
					default:
					}
					// up to 700 keys at a time: the table grows to 1024
					// slots, and a delete shifts whatever follows
					for i := range 350 {
						l.AllowAt("churn"+strconv.Itoa(g)+"-"+strconv.Itoa(i), base, 1)
					}
					for i := range 350 {
						l.Delete("churn" + strconv.Itoa(g) + "-" + strconv.Itoa(i))
					}
					l.SweepAt(base)
					if _, err := l.Reconfigure(cfg); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		side.Wait()
		for k := range hot {
			if got := allowed[k].Load(); got != limit && (l.Evictions() == 0 || got < limit) {
				t.Errorf("%s: hot key %d: %d allowed, want %d", algo, k, got, limit)
			}
		}
	}
}

// A decision the lock-free path takes is the one the locked path takes.
func TestLockFreeMatchesLocked(t *testing.T) {
	for _, algo := range []Algorithm{TokenBucket, LeakyBucket, SlidingWindow, FixedWindow} {
		cfg := Config{Algorithm: algo, Limits: []Limit{{10, time.Second}}}
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = 9, time.Second
		}
		fast, slow := mustNew(t, cfg), mustNew(t, cfg)
		for i := range slow.shards {
			slow.shards[i].table.cw = 0 // never published: always the lock
		}
		for i := range 200 {
			now := base.Add(time.Duration(i) * 37 * time.Millisecond)
			a, b := fast.AllowAt("k", now, int64(1+i%3)), slow.AllowAt("k", now, int64(1+i%3))
			if a != b {
				t.Fatalf("%s: request %d: lock-free %+v, locked %+v", algo, i, a, b)
			}
		}
	}
}
