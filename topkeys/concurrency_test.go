package topkeys

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentExact: goroutines adding to fewer keys than any shard can
// hold, while others read Top, Total and Reset absent keys, leave exact
// counts.
func TestConcurrentExact(t *testing.T) {
	const goroutines, rounds, keys = 8, 5000, 100
	s := New(DefaultCapacity)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("user-%03d", i)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if top := s.Top(10); len(top) > 10 {
				t.Errorf("Top(10) returned %d", len(top))
			}
			s.Total()
			s.Reset("absent")
		}
	}()
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				i := (g*31 + r) % keys
				s.Add(names[i], uint64(i%3+1))
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	want := map[string]uint64{}
	var total uint64
	for g := range goroutines {
		for r := range rounds {
			i := (g*31 + r) % keys
			want[names[i]] += uint64(i%3 + 1)
			total += uint64(i%3 + 1)
		}
	}
	top := s.Top(0)
	if len(top) != keys {
		t.Fatalf("%d keys tracked, want %d", len(top), keys)
	}
	for _, e := range top {
		if e.Count != want[e.Key] || e.Error != 0 {
			t.Errorf("%s: Count %d Error %d, want %d exact", e.Key, e.Count, e.Error, want[e.Key])
		}
	}
	if got := s.Total(); got != total {
		t.Fatalf("Total = %d, want %d", got, total)
	}
	checkInvariants(t, s)
}

// TestConcurrentEvicting: goroutines adding far more keys than the
// capacity, with resets, keep every shard consistent and the total exact.
func TestConcurrentEvicting(t *testing.T) {
	const goroutines, rounds = 8, 20000
	s := New(256)
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprint(i)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				k := names[(r*7+g)%len(names)]
				if r%1000 == 999 {
					s.Reset(k)
					continue
				}
				s.Add(k, 2)
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			s.Top(0)
		}
	})
	wg.Wait()
	if got, want := s.Total(), uint64(2*goroutines*(rounds-rounds/1000)); got != want {
		t.Fatalf("Total = %d, want %d", got, want)
	}
	for _, e := range s.Top(0) {
		if e.Count < e.Error || e.Count%2 != 0 || e.Error%2 != 0 {
			t.Fatalf("%+v: every weight is 2", e)
		}
	}
	checkInvariants(t, s)
}
