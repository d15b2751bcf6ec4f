package limiter

import (
	"strconv"
	"testing"
	"time"
	"unsafe"
)

func TestLenEvictions(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{10, time.Minute}}, MaxKeys: 1024}) // one shard
	for i := range 3000 {
		l.AllowAt("k"+strconv.Itoa(i), base, 1)
	}
	if l.Len() != 1024 || l.Evictions() != 3000-1024 {
		t.Fatalf("Len %d, Evictions %d; want 1024, %d", l.Len(), l.Evictions(), 3000-1024)
	}
	// known keys evict nothing
	known := 0
	for i := range 3000 {
		if k := "k" + strconv.Itoa(i); l.Contains(k) {
			l.AllowAt(k, base, 1)
			known++
		}
	}
	if known != 1024 || l.Len() != 1024 || l.Evictions() != 3000-1024 {
		t.Fatalf("%d known keys: Len %d, Evictions %d after known keys", known, l.Len(), l.Evictions())
	}
	// many shards: the bound holds over all of them
	l = mustNew(t, Config{Limits: []Limit{{10, time.Minute}}, MaxKeys: 100_000})
	if len(l.shards) != 64 {
		t.Fatalf("%d shards, want 64", len(l.shards))
	}
	for i := range 300_000 {
		l.AllowAt(strconv.Itoa(i), base, 1)
	}
	if n, e := l.Len(), l.Evictions(); n > 100_000 || n < 99_000 || int(e) != 300_000-n {
		t.Fatalf("Len %d, Evictions %d", n, e)
	}
}

// CLOCK: a new key is unreferenced until its second request, so keys seen
// once are evicted before keys in use. (The hand turns over the table's
// slots, in hash order: which of the keys seen once goes is up to it.)
func TestEvictionOrder(t *testing.T) {
	l := mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, time.Minute}}, MaxKeys: 4})
	for _, k := range []string{"a", "b", "c", "d"} {
		l.AllowAt(k, base, 1)
	}
	l.AllowAt("a", base, 1) // in use
	l.AllowAt("e", base, 1) // evicts b, c or d: a key seen once
	gone := 0
	for _, k := range []string{"b", "c", "d"} {
		if !l.Contains(k) {
			gone++
		}
	}
	if !l.Contains("a") || !l.Contains("e") || gone != 1 {
		t.Errorf("a kept: %v, e kept: %v, %d of b, c, d evicted (want true, true, 1)", l.Contains("a"), l.Contains("e"), gone)
	}
	// an idle key goes first, even if in use
	l.AllowAt("c", base, 1)
	l.AllowAt("d", base, 1)
	l.AllowAt("a", base, 1)
	l = mustNew(t, Config{Algorithm: FixedWindow, Limits: []Limit{{10, s1}}, MaxKeys: 4})
	for _, k := range []string{"a", "b", "c", "a", "b", "c"} {
		l.AllowAt(k, base.Add(2*s1), 1)
	}
	l.AllowAt("d", base, 1)
	l.AllowAt("d", base, 1)
	l.AllowAt("e", base.Add(s1), 1) // d's window is over: d is idle
	if l.Contains("d") || !l.Contains("a") || !l.Contains("e") || l.Evictions() != 1 {
		t.Errorf("idle d kept (%v), or a (%v) or e (%v) lost, evictions %d", l.Contains("d"), l.Contains("a"), l.Contains("e"), l.Evictions())
	}
}

// Keys in use survive a flood of keys seen once: a key requested again
// within a turn of the CLOCK hand is never evicted.
func TestEvictionKeepsKeysInUse(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{1e6, time.Minute}}, MaxKeys: 1024}) // one shard
	hot := make([]string, 100)
	for i := range hot {
		hot[i] = "hot" + strconv.Itoa(i)
		l.AllowAt(hot[i], base, 1)
		l.AllowAt(hot[i], base, 1) // referenced
	}
	const flood = 20_000
	for i := range flood {
		l.AllowAt("flood"+strconv.Itoa(i), base, 1)
		l.AllowAt(hot[i%len(hot)], base, 1)
	}
	for _, k := range hot {
		if !l.Contains(k) {
			t.Fatalf("%s evicted", k)
		}
	}
	if l.Len() != 1024 || l.Evictions() != uint64(len(hot)+flood-1024) {
		t.Fatalf("Len %d, Evictions %d", l.Len(), l.Evictions())
	}
}

// SweepAt frees exactly the keys whose state is that of a new key.
func TestSweep(t *testing.T) {
	for _, algo := range allAlgorithms {
		for _, burst := range []int64{0, 2} {
			l := mustNew(t, Config{Algorithm: algo, Limits: []Limit{{4, s1}}, Burst: burst})
			l.AllowAt("a", base, 1)
			l.AllowAt("b", base.Add(100*ms), 2)
			l.AllowAt("z", base, 0) // a key that took nothing
			if n := l.SweepAt(base.Add(100 * ms)); n != 1 || l.Len() != 2 || l.Contains("z") {
				t.Fatalf("%s burst %d: sweep at 100ms freed %d, Len %d", algo, burst, n, l.Len())
			}
			// every algorithm forgets a unit within two windows
			if n := l.SweepAt(base.Add(2*s1 + 500*ms)); n != 2 || l.Len() != 0 {
				t.Fatalf("%s burst %d: sweep at 2.5s freed %d, Len %d", algo, burst, n, l.Len())
			}
			// and a freed slot is reused clean
			fresh := mustNew(t, l.Config()).AllowAt("c", base.Add(3*s1), 3)
			if d := l.AllowAt("c", base.Add(3*s1), 3); d != fresh {
				t.Fatalf("%s burst %d: new key after sweep: %+v, want %+v", algo, burst, d, fresh)
			}
		}
	}
	// the exact edges of idleness
	for _, c := range []struct {
		algo Algorithm
		busy time.Duration // last instant the key is not idle
	}{
		{FixedWindow, s1 - ns},
		{SlidingWindow, 2*s1 - ns},
		{SlidingLog, s1 - ns},
		{TokenBucket, 250*ms - ns},
		{LeakyBucket, 250*ms - ns},
	} {
		l := mustNew(t, Config{Algorithm: c.algo, Limits: []Limit{{4, s1}}})
		l.AllowAt("k", base, 1)
		if n := l.SweepAt(base.Add(c.busy)); n != 0 {
			t.Errorf("%s: swept at %v", c.algo, c.busy)
		}
		if n := l.SweepAt(base.Add(c.busy + ns)); n != 1 {
			t.Errorf("%s: not swept at %v", c.algo, c.busy+ns)
		}
	}
}

// A shard is a whole number of cache lines, its lock and the table's
// header on the first (the padding is sized for 64-bit platforms).
func TestShardLayout(t *testing.T) {
	var s shard
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("32-bit platform")
	}
	if size := unsafe.Sizeof(s); size%64 != 0 || size < 128 {
		t.Errorf("a shard is %d bytes, want a multiple of 64 (at least 128)", size)
	}
	if end := unsafe.Offsetof(s.table) + unsafe.Offsetof(s.table.nlogs) + unsafe.Sizeof(s.table.nlogs); end > 64 {
		t.Errorf("the table's header ends at byte %d of the shard, off the lock's cache line", end)
	}
}

func TestShardCount(t *testing.T) {
	for _, c := range []struct{ maxKeys, want int }{
		{1, 1}, {2047, 1}, {2048, 2}, {100_000, 64}, {262_143, 128}, {1_000_000, 256}, {DefaultMaxKeys * 10, 256},
	} {
		if got := shardCount(c.maxKeys); got != c.want {
			t.Errorf("shardCount(%d) = %d, want %d", c.maxKeys, got, c.want)
		}
	}
	// capacities add up to MaxKeys
	l := mustNew(t, Config{Limits: []Limit{{1, s1}}, MaxKeys: 100_003})
	sum := 0
	for i := range l.shards {
		sum += l.shards[i].capacity
	}
	if sum != 100_003 {
		t.Errorf("capacities add up to %d", sum)
	}
}

// The table under churn: keys come and go at random, and Contains and Len
// always agree with a plain map.
func TestIndexChurn(t *testing.T) {
	l := mustNew(t, Config{Limits: []Limit{{10, time.Minute}}, MaxKeys: 1 << 20})
	ref := map[string]bool{}
	rng := uint64(1)
	for i := range 200_000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		key := "k" + strconv.Itoa(int(rng>>40)%3000)
		switch {
		case rng>>20&3 == 0:
			if l.Delete(key) != ref[key] {
				t.Fatalf("op %d: Delete(%q) disagrees", i, key)
			}
			delete(ref, key)
		default:
			l.AllowAt(key, base, 0)
			ref[key] = true
		}
		if probe := "k" + strconv.Itoa(int(rng>>8)%3000); l.Contains(probe) != ref[probe] {
			t.Fatalf("op %d: Contains(%q) = %v", i, probe, !ref[probe])
		}
	}
	if l.Len() != len(ref) {
		t.Fatalf("Len %d, want %d", l.Len(), len(ref))
	}
	for k := range ref {
		if !l.Contains(k) {
			t.Fatalf("lost %q", k)
		}
	}
}
