package limiter

import (
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 5,000,000 distinct keys through a Limiter bounded to 100,000: it never
// holds more, counts every eviction, and its heap is that of 100,000 keys.
// (About 2s; skipped under the race detector, which makes it minutes long
// and its heap figures meaningless.)
func TestMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race")
	}
	const keys, maxKeys = 5_000_000, 100_000
	before := heapAlloc()
	l := mustNew(t, Config{Limits: []Limit{{100, time.Minute}}, MaxKeys: maxKeys})
	buf := make([]byte, 0, 32)
	for i := range keys {
		buf = strconv.AppendInt(append(buf[:0], "client-"...), int64(i), 10)
		// the limiter keeps a hash, never the key: no need to copy it
		l.AllowAt(unsafe.String(&buf[0], len(buf)), base.Add(time.Duration(i)*time.Microsecond), 1)
		if i%1_000_000 == 0 && l.Len() > maxKeys {
			t.Fatalf("after %d keys: Len %d", i, l.Len())
		}
	}
	n, ev := l.Len(), l.Evictions()
	grown := int64(heapAlloc()) - int64(before)
	runtime.KeepAlive(l)
	t.Logf("%d keys through MaxKeys %d: Len %d, Evictions %d, heap grew %.1f MB (%.0f bytes per live key)", keys, maxKeys, n, ev, float64(grown)/1e6, float64(grown)/float64(n))
	if n > maxKeys || n < maxKeys*99/100 {
		t.Errorf("Len %d, want at most %d (and about that)", n, maxKeys)
	}
	if int(ev) != keys-n {
		t.Errorf("Evictions %d, want %d", ev, keys-n)
	}
	if grown > 30e6 {
		t.Errorf("heap grew %.1f MB for %d live keys, want < 30 MB", float64(grown)/1e6, n)
	}
}

// Memory per live key at 1,000,000 keys: at most 64 bytes for the sliding
// window, the fixed window and the token bucket, 96 for a sliding log of
// one event a key (its event in the log, no ring). (About 5s; skipped with
// -short and under -race.)
func TestMemoryPerKey(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("slow; heap figures are meaningless under -race")
	}
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, c := range []struct {
		algo  Algorithm
		bound float64 // bytes per key; 0: report only
	}{
		{SlidingWindow, 64}, {FixedWindow, 64}, {TokenBucket, 64}, {LeakyBucket, 0}, {SlidingLog, 96},
	} {
		before := heapAlloc()
		// MaxKeys above n: keys spread unevenly over shards, and none may be evicted
		l := mustNew(t, Config{Algorithm: c.algo, Limits: []Limit{{100, time.Minute}}, MaxKeys: 2 * n})
		for _, k := range keys {
			l.AllowAt(k, base, 1)
		}
		perKey := float64(int64(heapAlloc())-int64(before)) / n
		if l.Len() != n {
			t.Fatalf("%s: Len %d, want %d", c.algo, l.Len(), n)
		}
		runtime.KeepAlive(l)
		t.Logf("%s: %.1f bytes per key (a record is %d words of 8 bytes; the rest is empty slots, and event logs for sliding_log)", c.algo, perKey, l.plan.Load().stride)
		if c.bound > 0 && perKey > c.bound {
			t.Errorf("%s: %.1f bytes per key, want ≤ %.0f", c.algo, perKey, c.bound)
		}
	}
	runtime.KeepAlive(keys)
}

// A sliding log of N = 1,000,000 costs nothing until used: its events grow
// with what is taken, so a key with one event costs what it costs at N=10.
func TestSlidingLogGrowsOnDemand(t *testing.T) {
	perKey := func(n int64) float64 {
		before := heapAlloc()
		l := mustNew(t, Config{Algorithm: SlidingLog, Limits: []Limit{{n, time.Hour}}})
		for i := range 20_000 {
			l.AllowAt("k"+strconv.Itoa(i), base, 1)
		}
		if log := logOf(t, l, "k1"); log.buf != nil {
			t.Errorf("N=%d: a log with one event has a ring of %d slots, want none", n, len(log.buf))
		}
		grown := float64(int64(heapAlloc())-int64(before)) / 20_000
		runtime.KeepAlive(l)
		return grown
	}
	small, large := perKey(10), perKey(1_000_000)
	t.Logf("one event: %.0f bytes per key at N=10, %.0f at N=1e6", small, large)
	if large > small+32 {
		t.Errorf("one event costs %.0f bytes per key at N=1e6, %.0f at N=10", large, small)
	}
}
