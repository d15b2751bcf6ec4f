package limiter

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hammer runs g goroutines making perG requests of one unit each on key,
// at base plus a clock that advances 1ns per request, and returns how many
// were allowed.
func hammer(l *Limiter, key string, g, perG int) int64 {
	var allowed, clock atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for range perG {
				now := base.Add(time.Duration(clock.Add(1)))
				if l.AllowAt(key, now, 1).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
}

// 64 goroutines on one key with 1000 per 10s: exactly 1000 pass, for every
// algorithm. (The sliding window is exact too here: every request falls in
// one window with nothing before it.)
func TestConcurrentExact(t *testing.T) {
	for _, algo := range allAlgorithms {
		cfg := Config{Algorithm: algo, Limits: []Limit{{1000, 10 * s1}}}
		if algo == LeakyBucket {
			// nginx burst=999: 1000 back to back, the last one held 9.99s
			cfg.Burst, cfg.MaxDelay = 999, 10*s1
		}
		l := mustNew(t, cfg)
		if got := hammer(l, "k", 64, 100); got != 1000 {
			t.Errorf("%s: %d allowed, want 1000", algo, got)
		}
	}
	// with a burst bucket in front: exactly the burst
	for _, algo := range []Algorithm{SlidingWindow, FixedWindow, SlidingLog, TokenBucket} {
		l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{1000, 10 * s1}}, Burst: 100})
		if got := hammer(l, "k", 64, 100); got != 100 {
			t.Errorf("%s burst 100: %d allowed, want 100", algo, got)
		}
	}
}

// Many keys over many shards, with refunds, peeks, sweeps, deletes and
// reconfigurations going on: every key still admits exactly its limit.
func TestConcurrentKeys(t *testing.T) {
	for _, algo := range allAlgorithms {
		cfg := Config{Algorithm: algo, Limits: []Limit{{50, time.Hour}}, MaxKeys: 1 << 20}
		if algo == LeakyBucket {
			cfg.Burst, cfg.MaxDelay = 49, time.Hour
		}
		l := mustNew(t, cfg)
		const keys = 64
		var allowed [keys]atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				for i := range 4000 {
					k := (i*7 + g) % keys
					key := "key" + strconv.Itoa(k)
					now := base.Add(time.Duration(i) * time.Microsecond)
					if d := l.AllowAt(key, now, 1); d.Allowed {
						allowed[k].Add(1)
						if i%5 == 0 { // give one back now and then
							l.Refund(key, Taken{At: now, Cost: 1, Scale: 1}, now)
							allowed[k].Add(-1)
						}
					}
					l.PeekAt(key, now, 1)
				}
			})
		}
		var side sync.WaitGroup
		side.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				l.SweepAt(base)
				l.Len()
				l.Evictions()
				l.Delete("nobody")
				if _, err := l.Reconfigure(cfg); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Wait()
		close(stop)
		side.Wait()
		for k := range keys {
			if got := allowed[k].Load(); got != 50 {
				t.Errorf("%s: key %d: %d allowed, want 50", algo, k, got)
			}
		}
	}
}
