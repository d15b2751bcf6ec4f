package limiter

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// ifStep is one row of an InFlight step table: acquire (or release the
// i-th slot held) and what must follow.
type ifStep struct {
	release int    // > 0: release slot release-1 instead of acquiring
	key     string // default "k"
	n       int64
	ok      bool
	in      int64 // inFlight returned (acquire), or InFlightOf after (release)
	total   int64
	keys    int
}

func TestInFlightSteps(t *testing.T) {
	f := NewInFlight(0)
	var held []Slot
	steps := []ifStep{
		{n: 2, ok: true, in: 1, total: 1, keys: 1},
		{n: 2, ok: true, in: 2, total: 2, keys: 1},
		{n: 2, ok: false, in: 2, total: 2, keys: 1},    // at n: refused, nothing taken
		{n: 3, ok: true, in: 3, total: 3, keys: 1},     // a larger scale admits
		{n: 1, ok: false, in: 3, total: 3, keys: 1},    // a smaller one refuses all above it
		{key: "b", n: 0, ok: false, total: 3, keys: 1}, // n 0: refused, no entry
		{key: "b", n: 1, ok: true, in: 1, total: 4, keys: 2},
		{release: 1, in: 2, total: 3, keys: 2},
		{release: 1, in: 2, total: 3, keys: 2}, // the same slot again: nothing
		{release: 2, in: 1, total: 2, keys: 2},
		{release: 7, key: "b", in: 0, total: 1, keys: 1}, // b's last: its entry freed
		{release: 4, in: 0, total: 0, keys: 0},
		{release: 4, in: 0, total: 0, keys: 0},
		{release: 5, in: 0, total: 0, keys: 0},     // a refused slot holds nothing
		{n: 1, ok: true, in: 1, total: 1, keys: 1}, // afresh
	}
	for i, s := range steps {
		key := s.key
		if key == "" {
			key = "k"
		}
		if s.release > 0 {
			held[s.release-1].Release()
			if got := f.InFlightOf(key); got != s.in {
				t.Fatalf("step %d: InFlightOf %d, want %d", i, got, s.in)
			}
		} else {
			slot, ok, in := f.AcquireScaled(key, s.n)
			if ok != s.ok || in != s.in || slot.Held() != ok {
				t.Fatalf("step %d: ok %v in %d held %v, want ok %v in %d", i, ok, in, slot.Held(), s.ok, s.in)
			}
			held = append(held, slot)
		}
		if f.Total() != s.total || f.Len() != s.keys {
			t.Fatalf("step %d: Total %d Len %d, want %d %d", i, f.Total(), f.Len(), s.total, s.keys)
		}
	}
}

// TestInFlightMaxKeys: the bound on keys in flight is the InFlight's,
// exactly, whatever the shards: B distinct keys are admitted, then every
// new key is refused, one of every shard included, while the keys in
// flight go on; a release makes room for exactly one.
func TestInFlightMaxKeys(t *testing.T) {
	for _, bound := range []int{1, 3, 100, 1000} {
		f := NewInFlight(bound)
		held := make([]Slot, bound)
		for i := range held {
			slot, ok, in := f.AcquireScaled("k"+strconv.Itoa(i), 5)
			if !ok || in != 1 {
				t.Fatalf("bound %d: key %d of %d refused (%d in flight)", bound, i+1, bound, in)
			}
			held[i] = slot
		}
		refusedIn := make(map[*inFlightShard]bool)
		for i := bound; len(refusedIn) < inFlightShards; i++ {
			key := "new" + strconv.Itoa(i)
			if _, ok, in := f.AcquireScaled(key, 5); ok || in != 0 {
				t.Fatalf("bound %d: key %d admitted past the bound (%v, %d in flight)", bound, i+1, ok, in)
			}
			refusedIn[f.shard(maphash.String(f.seed, key))] = true
			if i > bound+100*inFlightShards {
				t.Fatalf("bound %d: no key of %d shards tried", bound, inFlightShards-len(refusedIn))
			}
		}
		if f.Len() != bound || f.Total() != int64(bound) {
			t.Fatalf("bound %d: Len %d Total %d", bound, f.Len(), f.Total())
		}
		// A key in flight goes on; the bound is on new keys only.
		extra, ok, in := f.AcquireScaled("k0", 5)
		if !ok || in != 2 {
			t.Fatalf("bound %d: a key in flight refused past the bound: %v %d", bound, ok, in)
		}
		extra.Release()
		held[bound-1].Release()
		if _, ok, _ := f.AcquireScaled("room", 5); !ok {
			t.Fatalf("bound %d: refused after a release", bound)
		}
		if _, ok, _ := f.AcquireScaled("no-room", 5); ok {
			t.Fatalf("bound %d: two keys admitted for one released", bound)
		}
		full := f.Full()
		f.Forget("room")
		for i := range held {
			held[i].Release()
		}
		if f.Total() != 0 || f.Len() != 0 || f.keys.Load() != 0 {
			t.Fatalf("bound %d: Total %d Len %d keys %d after releasing all", bound, f.Total(), f.Len(), f.keys.Load())
		}
		if full < inFlightShards+1 {
			t.Fatalf("bound %d: Full %d", bound, full)
		}
	}
}

// TestInFlightSetMaxKeys: a lowered bound keeps the keys in flight and
// refuses new ones until enough are freed; a raised one admits at once.
func TestInFlightSetMaxKeys(t *testing.T) {
	f := NewInFlight(4)
	var held []Slot
	for i := range 4 {
		s, _, _ := f.AcquireScaled("k"+strconv.Itoa(i), 1)
		held = append(held, s)
	}
	f.SetMaxKeys(2)
	if _, ok, _ := f.AcquireScaled("new", 1); ok {
		t.Fatal("admitted over a lowered bound")
	}
	held[0].Release()
	held[1].Release()
	if _, ok, _ := f.AcquireScaled("new", 1); ok {
		t.Fatal("admitted at the lowered bound")
	}
	held[2].Release()
	if _, ok, _ := f.AcquireScaled("new", 1); !ok {
		t.Fatal("refused under the lowered bound")
	}
	f.SetMaxKeys(0)
	if _, ok, _ := f.AcquireScaled("newer", 1); !ok {
		t.Fatal("refused after the bound was raised")
	}
}

func TestInFlightForget(t *testing.T) {
	f := NewInFlight(0)
	a, _, _ := f.AcquireScaled("k", 2)
	b, _, _ := f.AcquireScaled("k", 2)
	if !f.Forget("k") || f.Total() != 0 || f.Len() != 0 {
		t.Fatalf("Forget: Total %d Len %d", f.Total(), f.Len())
	}
	c, ok, in := f.AcquireScaled("k", 2) // counts from zero
	if !ok || in != 1 {
		t.Fatalf("after Forget: %v %d", ok, in)
	}
	a.Release() // of the forgotten entry: nothing
	b.Release()
	if got := f.InFlightOf("k"); got != 1 || f.Total() != 1 {
		t.Fatalf("old slots released into the new entry: %d, Total %d", got, f.Total())
	}
	c.Release()
	if f.Forget("k") || f.Total() != 0 {
		t.Fatal("Forget of a freed key")
	}
}

func TestInFlightPeak(t *testing.T) {
	f := NewInFlight(0)
	var s [3]Slot
	for i := range s {
		s[i], _, _ = f.AcquireScaled("k", 10)
	}
	s[0].Release()
	s[1].Release()
	if p, n := f.TakePeak("k"); p != 3 || n != 1 {
		t.Fatalf("TakePeak %d %d, want 3 1", p, n)
	}
	if p, n := f.TakePeak("k"); p != 1 || n != 1 {
		t.Fatalf("TakePeak again %d %d, want 1 1", p, n)
	}
	s[2].Release()
	if p, n := f.TakePeak("k"); p != 0 || n != 0 {
		t.Fatalf("TakePeak of a freed key %d %d", p, n)
	}
}

func TestInFlightBusiest(t *testing.T) {
	f := NewInFlight(0)
	for i := range 50 {
		for range i % 7 {
			f.AcquireScaled("k"+strconv.Itoa(i), 100)
		}
	}
	got := f.Busiest(4)
	want := []KeyInFlight{{"k13", 6}, {"k20", 6}, {"k27", 6}, {"k34", 6}}
	if len(got) != len(want) {
		t.Fatalf("Busiest %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Busiest %v, want %v", got, want)
		}
	}
	if len(f.Busiest(1000)) != f.Len() || f.Busiest(0) != nil {
		t.Fatal("Busiest bounds")
	}
}

func TestInFlightAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race")
	}
	f := NewInFlight(0)
	keep, _, _ := f.AcquireScaled("k", 10)
	if a := testing.AllocsPerRun(1000, func() {
		s, _, _ := f.AcquireScaled("k", 10)
		s.Release()
	}); a != 0 {
		t.Errorf("existing key: %.1f allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		s, _, _ := f.AcquireScaled("fresh", 10) // created and freed each time
		s.Release()
	}); a != 0 {
		t.Errorf("key created and freed: %.1f allocs", a)
	}
	keep.Release()
}

// Many goroutines acquire and release at random over a few keys, each
// holding up to a few slots and releasing them in random order, some
// twice: no key is ever over its n, and everything comes back to zero.
func TestInFlightHammer(t *testing.T) {
	f := NewInFlight(0)
	const n = 4
	workers, rounds := 16, 20_000
	if raceEnabled {
		rounds = 3_000
	}
	var wg sync.WaitGroup
	var over sync.Once
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var held []Slot
			for range rounds {
				if len(held) > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(len(held))
					held[i].Release()
					if rng.IntN(4) == 0 {
						held[i].Release() // twice: nothing
					}
					held = append(held[:i], held[i+1:]...)
					continue
				}
				key := "k" + strconv.Itoa(rng.IntN(8))
				s, ok, in := f.AcquireScaled(key, n)
				if ok && in > n || !ok && in < n {
					over.Do(func() { t.Errorf("%s: ok %v with %d in flight", key, ok, in) })
				}
				if ok {
					held = append(held, s)
				}
			}
			for i := range held {
				held[i].Release()
			}
		}()
	}
	wg.Wait()
	if f.Total() != 0 || f.Len() != 0 {
		t.Fatalf("Total %d Len %d after every release", f.Total(), f.Len())
	}
}

// One hot key, from every P: acquire and release, the cost a request of
// a max_concurrent rule pays (beside BenchmarkHotKey's AllowAt).
func BenchmarkInFlightHotKey(b *testing.B) {
	f := NewInFlight(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s, ok, _ := f.AcquireScaled("hot", 1<<40)
			if !ok {
				b.Fatal("refused")
			}
			s.Release()
		}
	})
}

// Many keys, each with one request held throughout (so its entry stays):
// every acquire and release is on an existing key of another shard.
func BenchmarkInFlightManyKeys(b *testing.B) {
	f := NewInFlight(0)
	keys := make([]string, 50_000)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
		f.AcquireScaled(keys[i], 1<<40)
	}
	var seq sync.Mutex
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		i := next * 7919
		next++
		seq.Unlock()
		for pb.Next() {
			i++
			s, _, _ := f.AcquireScaled(keys[i%len(keys)], 1<<40)
			s.Release()
		}
	})
}

// Many keys, each created by its acquire and freed by its release: a
// flood of distinct clients with one short request each.
func BenchmarkInFlightNewKeys(b *testing.B) {
	f := NewInFlight(0)
	keys := make([]string, 50_000)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	var seq sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		i := next * 7919
		next++
		seq.Unlock()
		for pb.Next() {
			i++
			s, _, _ := f.AcquireScaled(keys[i%len(keys)], 1<<40)
			s.Release()
		}
	})
}
