package topkeys

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// TestAddAllocs: Add allocates nothing, on a tracked key or on one that
// replaces another, long or short.
func TestAddAllocs(t *testing.T) {
	s := New(DefaultCapacity)
	s.Add("tracked", 1)
	if a := testing.AllocsPerRun(1000, func() { s.Add("tracked", 1) }); a != 0 {
		t.Errorf("Add of a tracked key: %v allocs", a)
	}
	keys := make([]string, 4*DefaultCapacity)
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%d", i)
		if i%2 == 0 {
			keys[i] += string(make([]byte, 2*MaxKeyLen)) // truncated
		}
	}
	n := 0
	if a := testing.AllocsPerRun(10000, func() { s.Add(keys[n%len(keys)], 1); n++ }); a != 0 {
		t.Errorf("Add replacing a key: %v allocs", a)
	}
	if !slices.ContainsFunc(s.Top(0), func(e Entry) bool { return e.Error > 0 }) {
		t.Fatal("no key was replaced")
	}
	if a := testing.AllocsPerRun(100, func() { s.Reset(keys[n%len(keys)]); n++ }); a != 0 {
		t.Errorf("Reset: %v allocs", a)
	}
	// Top allocates its result (entries and one string of keys); the
	// copies it sorts are reused, from a sync.Pool, which a GC may empty,
	// hence the tolerance, and which the race detector empties at random.
	if raceEnabled {
		return
	}
	if a := testing.AllocsPerRun(100, func() { s.Top(10) }); a > 2.5 {
		t.Errorf("Top(10): %v allocs, want 2", a)
	}
}

// TestBytes: the memory of a DefaultCapacity sketch is what the package
// documentation says (216 bytes a slot, 56 KiB) and it is what New
// allocates; nothing is allocated after New (TestAddAllocs).
func TestBytes(t *testing.T) {
	if unsafe.Sizeof(shard{})%128 != 0 {
		t.Errorf("shard is %d bytes, not a multiple of 128", unsafe.Sizeof(shard{}))
	}
	if unsafe.Sizeof(uintptr(0)) == 8 {
		if a, b := unsafe.Sizeof(slot{}), unsafe.Sizeof(bucket{}); a != 48 || b != 24 {
			t.Errorf("slot %d bytes, bucket %d: the documentation says 48, 24", a, b)
		}
		if got := New(DefaultCapacity).Bytes(); got != 57_416 {
			t.Errorf("Bytes() = %d, the documentation says 57,416", got)
		}
	}
	if raceEnabled {
		return
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(DefaultCapacity)
	runtime.ReadMemStats(&after)
	allocated := int(after.TotalAlloc - before.TotalAlloc)
	if b := s.Bytes(); allocated < b || allocated > b+b/20 {
		t.Errorf("New allocated %d bytes, Bytes() = %d", allocated, b)
	}
	t.Logf("DefaultCapacity (%d keys): Bytes() = %d (%.1f KiB, %.1f bytes/slot); New allocated %d",
		s.Capacity(), s.Bytes(), float64(s.Bytes())/1024, float64(s.Bytes())/float64(s.Capacity()), allocated)

}
