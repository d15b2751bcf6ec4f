package limiter

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// benchConfig is a limit that every benchmark request passes: the
// decision's full path, state written.
func benchConfig(algo Algorithm, maxKeys int) Config {
	cfg := Config{Algorithm: algo, Limits: []Limit{{1e9, time.Hour}}, MaxKeys: maxKeys}
	if algo == LeakyBucket {
		cfg.MaxDelay = time.Hour
	}
	return cfg
}

// One hot key, from every P: the shard lock's contention is the cost.
func BenchmarkHotKey(b *testing.B) {
	for _, algo := range allAlgorithms {
		b.Run(string(algo), func(b *testing.B) {
			l := mustNew(b, benchConfig(algo, 0))
			b.ReportAllocs()
			takeFastCounts()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !l.AllowAt("hot", base, 1).Allowed {
						b.Fatal("denied")
					}
				}
			})
			reportFastCounts(b)
		})
	}
}

// reportFastCounts reports, per decision, why the lock-free path left
// decisions to the lock and how often the lock was waited for, under the build tag
// limiterstats (faststats_on.go); nothing in a normal build.
func reportFastCounts(b *testing.B) {
	n, waitNs := takeFastCounts()
	for o, name := range [fastOutcomes]string{"cas-lost", "frozen", "not-fast", "lock-waited"} {
		if n[o] > 0 {
			b.ReportMetric(float64(n[o])/float64(b.N), name+"/op")
		}
	}
	if waitNs > 0 {
		b.ReportMetric(float64(waitNs)/float64(b.N), "lock-wait-ns/op")
	}
}

// The same with two limits and a burst bucket in front (window
// algorithms): what a typical rule costs.
func BenchmarkHotKeyTwoLimitsBurst(b *testing.B) {
	for _, algo := range allAlgorithms {
		if algo == LeakyBucket {
			continue
		}
		b.Run(string(algo), func(b *testing.B) {
			cfg := benchConfig(algo, 0)
			cfg.Limits = append(cfg.Limits, Limit{2e9, 24 * time.Hour})
			cfg.Burst = 1e9
			l := mustNew(b, cfg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.AllowAt("hot", base, 1)
				}
			})
		})
	}
}

var (
	benchKeysOnce sync.Once
	benchKeyBuf   []byte   // benchKeyCount keys of benchKeyLen bytes, back to back
	benchLimiters sync.Map // Algorithm → *Limiter holding every bench key
)

const (
	benchKeyCount = 1_000_000
	benchKeyLen   = 16 // "client-000000042"
)

// benchKey is bench key i, without a copy: one cache line to read, not a
// string header and then its bytes. (The limiter keeps a hash of a key,
// never the key.)
func benchKey(i uint64) string {
	return unsafe.String(&benchKeyBuf[i*benchKeyLen], benchKeyLen)
}

// populated is a Limiter of algo holding the 1,000,000 bench keys, built
// once per process, outside any timer.
func populated(b *testing.B, algo Algorithm) *Limiter {
	benchKeysOnce.Do(func() {
		benchKeyBuf = make([]byte, 0, benchKeyCount*benchKeyLen)
		for i := range benchKeyCount {
			benchKeyBuf = fmt.Appendf(benchKeyBuf, "client-%09d", i)
		}
	})
	if l, ok := benchLimiters.Load(algo); ok {
		return l.(*Limiter)
	}
	b.StopTimer()
	l := mustNew(b, benchConfig(algo, 2*benchKeyCount))
	for i := range uint64(benchKeyCount) {
		l.AllowAt(benchKey(i), base, 1)
	}
	benchLimiters.Store(algo, l)
	b.StartTimer()
	return l
}

// 1,000,000 live keys, picked at random: cache misses are the cost (the
// key's bytes, the shard's index, the key's state).
func BenchmarkKeys1M(b *testing.B) {
	for _, algo := range allAlgorithms {
		b.Run(string(algo), func(b *testing.B) {
			l := populated(b, algo)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				x := uint64(time.Now().UnixNano()) | 1 // xorshift
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					l.AllowAt(benchKey(x%benchKeyCount), base, 1)
				}
			})
		})
	}
}

// A flood of new keys through a full Limiter: every request evicts one.
func BenchmarkNewKeysEvicting(b *testing.B) {
	l := mustNew(b, Config{Limits: []Limit{{100, time.Minute}}, MaxKeys: 100_000})
	keys := floodKeys()
	for i := range 200_000 {
		l.AllowAt(keys[i], base, 1)
	}
	floodLoop(b, l, keys)
}

// A flood of new keys through a full sliding-log Limiter: every request
// evicts one, and each key's log holds one event.
func BenchmarkNewKeysEvictingSlidingLog(b *testing.B) {
	l := mustNew(b, Config{Algorithm: SlidingLog, Limits: []Limit{{100, time.Minute}}, MaxKeys: 100_000})
	keys := floodKeys()
	for i := range 200_000 {
		l.AllowAt(keys[i], base, 1)
	}
	floodLoop(b, l, keys)
}

// The worst case of spent keys for eviction: every shard full of spent
// keys, and a flood of new keys, each of which evicts the last one (the
// only key not spent), wherever the hand finds it.
func BenchmarkNewKeysEvictingAmongSpent(b *testing.B) {
	l := mustNew(b, Config{Limits: []Limit{{1, time.Hour}}, MaxKeys: 100_000})
	for i := range 100_000 {
		k := "spent-" + strconv.Itoa(i)
		l.AllowAt(k, base, 1)
		l.AllowAt(k, base, 1)
	}
	keys := floodKeys()
	_, before := l.EvictionCounts() // shards filled unevenly evict spent keys
	floodLoop(b, l, keys)
	b.StopTimer()
	// a full shard of spent keys gives one up to the first key of the
	// flood, never more
	if _, spent := l.EvictionCounts(); spent-before > uint64(len(l.shards)) {
		b.Fatalf("%d spent keys evicted by the flood, %d shards", spent-before, len(l.shards))
	}
}

// floodKeys are 1<<20 distinct keys, for floods of new keys.
func floodKeys() []string {
	keys := make([]string, 1<<20)
	for i := range keys {
		keys[i] = "flood-" + strconv.Itoa(i)
	}
	return keys
}

// floodLoop times a request of a new key from keys (floodKeys) per
// iteration, as a flood of new keys sends them.
func floodLoop(b *testing.B, l *Limiter, keys []string) {
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		l.AllowAt(keys[i&(1<<20-1)], base, 1)
		i++
	}
}
