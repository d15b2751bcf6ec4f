package limiters

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Every benchmark request passes: 1e9 per hour, back to back, so each
// decision runs in full and writes its state.
const (
	benchLimit  = 1e9
	benchWindow = time.Hour
)

const (
	benchKeyCount = 1_000_000
	benchKeyLen   = 16 // "client-000000042"
	// benchMaxKeys bounds edgelimit to twice the keys: its shards fill
	// unevenly, and none must evict.
	benchMaxKeys = 2 * benchKeyCount
	// zipfS is the Zipf exponent of BenchmarkZipf1M: P(rank k) ∝ (1+k)^−s;
	// the hottest key then takes 12% of the requests, the top 100 53%, the
	// top 10,000 82%.
	zipfS = 1.1
	// zipfTableLen is how many precomputed Zipf draws the goroutines walk.
	zipfTableLen = 1 << 22
)

// benchKeys is benchKeyCount keys of benchKeyLen bytes, back to back,
// built on first use.
var benchKeys = sync.OnceValue(func() []byte {
	buf := make([]byte, 0, benchKeyCount*benchKeyLen)
	for i := range benchKeyCount {
		buf = fmt.Appendf(buf, "client-%09d", i)
	}
	return buf
})

// benchKey is bench key i, without a copy or an allocation: a view into
// keys, which is benchKeys(). (A store that keeps the key keeps the view.)
func benchKey(keys []byte, i uint64) string {
	return unsafe.String(&keys[i*benchKeyLen], benchKeyLen)
}

// populatedStore is the one populated Store held at a time.
var populatedStore struct {
	name  string
	store Store
}

// populated is a Store of c holding the 1,000,000 bench keys, built outside
// the timer. One is kept at a time: the previous contender's is freed
// first, so that no benchmark pays for another's heap in its collections.
func populated(b *testing.B, c Contender) Store {
	if populatedStore.name == c.Name {
		return populatedStore.store
	}
	b.StopTimer()
	populatedStore.name, populatedStore.store = "", nil
	runtime.GC()
	s := c.New(benchLimit, benchWindow, benchMaxKeys)
	keys := benchKeys()
	for i := range uint64(benchKeyCount) {
		s.Allow(benchKey(keys, i), base)
	}
	populatedStore.name, populatedStore.store = c.Name, s
	runtime.GC()
	b.StartTimer()
	return s
}

// seeds gives each parallel goroutine its own xorshift state.
var seeds atomic.Uint64

// newSeed is a nonzero xorshift state, different for each call.
func newSeed() uint64 {
	return (seeds.Add(1) * 0x9e3779b97f4a7c15) | 1
}

// xorshift advances x and returns it.
func xorshift(x *uint64) uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return *x
}

// runParallel runs decide on every P and fails b if any request was
// denied: a benchmark request always passes.
func runParallel(b *testing.B, decide func(pb *testing.PB) int) {
	var denied atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) { denied.Add(int64(decide(pb))) })
	b.StopTimer()
	if n := denied.Load(); n > 0 {
		b.Fatalf("%d requests denied", n)
	}
}

// One hot key, from every P: the store's synchronisation on one key is
// the cost.
func BenchmarkHotKey(b *testing.B) {
	for _, c := range Contenders() {
		b.Run(c.Name, func(b *testing.B) {
			s := c.New(benchLimit, benchWindow, benchMaxKeys)
			key := benchKey(benchKeys(), 0)
			runParallel(b, func(pb *testing.PB) (denied int) {
				for pb.Next() {
					if !s.Allow(key, base) {
						denied++
					}
				}
				return denied
			})
		})
	}
}

// BenchmarkHotKey for edgelimit deciding by AllowAt, quotas computed (the
// contenders of BenchmarkHotKey decide by AllowInto without them): the
// cost of the quotas a RateLimit header shows.
func BenchmarkQuotas(b *testing.B) {
	for _, c := range edgelimitQuotaContenders() {
		b.Run("HotKey/"+c.Name, func(b *testing.B) {
			s := c.New(benchLimit, benchWindow, benchMaxKeys)
			key := benchKey(benchKeys(), 0)
			runParallel(b, func(pb *testing.PB) (denied int) {
				for pb.Next() {
					if !s.Allow(key, base) {
						denied++
					}
				}
				return denied
			})
		})
	}
}

// 1,000,000 live keys, picked uniformly at random: cache misses are the
// cost.
func BenchmarkUniform1M(b *testing.B) {
	for _, c := range Contenders() {
		b.Run(c.Name, func(b *testing.B) {
			s, keys := populated(b, c), benchKeys()
			runParallel(b, func(pb *testing.PB) (denied int) {
				x := newSeed()
				for pb.Next() {
					if !s.Allow(benchKey(keys, xorshift(&x)%benchKeyCount), base) {
						denied++
					}
				}
				return denied
			})
		})
	}
}

// zipfTable is zipfTableLen key indexes drawn from a Zipf distribution of
// exponent zipfS over the bench keys, ranks mapped to keys by a random
// permutation (so hot keys are not neighbours in benchKeys). Built on
// first use, with fixed seeds.
var zipfTable = sync.OnceValue(func() []uint32 {
	rng := rand.New(rand.NewPCG(3, 4))
	perm := rng.Perm(benchKeyCount)
	z := rand.NewZipf(rng, zipfS, 1, benchKeyCount-1)
	table := make([]uint32, zipfTableLen)
	for i := range table {
		table[i] = uint32(perm[z.Uint64()])
	}
	return table
})

// The same 1,000,000 keys, picked by a Zipf distribution (s = 1.1) from a
// precomputed table that each goroutine walks from a random start: a few
// hot keys contend, the tail misses the cache.
func BenchmarkZipf1M(b *testing.B) {
	table := zipfTable()
	for _, c := range Contenders() {
		b.Run(c.Name, func(b *testing.B) {
			s, keys := populated(b, c), benchKeys()
			runParallel(b, func(pb *testing.PB) (denied int) {
				x := newSeed()
				i := xorshift(&x)
				for pb.Next() {
					i++
					if !s.Allow(benchKey(keys, uint64(table[i%zipfTableLen])), base) {
						denied++
					}
				}
				return denied
			})
		})
	}
}

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The heap one live key costs: a fresh store takes 1,000,000 new keys,
// each made for its request as a server would (a new 16-byte string, which
// the store keeps or leaves to the collector), and B/key is the live heap
// it grew by, store included, over the keys. The work is done once, before
// b.Loop: ns/op and allocs/op are those of an empty loop; ns/insert is
// the time a new key took, formatting its string included.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, c := range Contenders() {
		b.Run(c.Name, func(b *testing.B) {
			b.ReportAllocs()
			populatedStore.name, populatedStore.store = "", nil
			before := heapAlloc()
			start := time.Now()
			s := c.New(benchLimit, benchWindow, benchMaxKeys)
			buf := make([]byte, 0, benchKeyLen)
			for i := range benchKeyCount {
				buf = fmt.Appendf(buf[:0], "client-%09d", i)
				s.Allow(string(buf), base) // a new string, as a request's key would be
			}
			elapsed := time.Since(start)
			grown := float64(heapAlloc()) - float64(before)
			runtime.KeepAlive(s)
			for b.Loop() {
			}
			b.ReportMetric(grown/benchKeyCount, "B/key")
			b.ReportMetric(float64(elapsed.Nanoseconds())/benchKeyCount, "ns/insert")
		})
	}
}
