package topkeys

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAddHit: Add of a tracked key. "heavy": the same key again, as
// the heaviest keys are, alone in their count's bucket; "100": 100 keys
// in turn (all tracked: fewer than a shard holds land in any shard), each
// moving to the next bucket past its equals.
func BenchmarkAddHit(b *testing.B) {
	b.Run("heavy", func(b *testing.B) {
		s := New(DefaultCapacity)
		s.Add("192.168.0.1", 1)
		b.ReportAllocs()
		for b.Loop() {
			s.Add("192.168.0.1", 1)
		}
	})
	b.Run("100", func(b *testing.B) {
		s := New(DefaultCapacity)
		keys := make([]string, 100)
		for i := range keys {
			keys[i] = fmt.Sprintf("192.168.%d.%d", i/256, i%256)
			s.Add(keys[i], 1)
		}
		if len(s.Top(0)) != len(keys) {
			b.Fatal("not every key is tracked")
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Add(keys[i%len(keys)], 1)
			i++
		}
	})
}

// BenchmarkAddMiss: Add of keys cycling through 4 × capacity, so that
// every Add replaces the lightest key of its shard.
func BenchmarkAddMiss(b *testing.B) {
	s := New(DefaultCapacity)
	keys := make([]string, 4*DefaultCapacity)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.1.%d.%d", i/256, i%256)
	}
	for _, k := range keys {
		s.Add(k, 1)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(keys[i%len(keys)], 1)
		i++
	}
	b.StopTimer()
	if top := s.Top(1); top[0].Error == 0 {
		b.Fatal("keys were not replaced")
	}
}

// zipfBench is a Zipf (s = 1.1) stream of 1<<20 requests over 100,000 keys.
var zipfBench = sync.OnceValues(func() ([]string, []int32) {
	return zipfKeys(100_000), zipfStream(42, 100_000, 1<<20)
})

// BenchmarkAddZipf: Add on Zipf traffic, mostly hits on heavy keys and
// replacements by the tail.
func BenchmarkAddZipf(b *testing.B) {
	keys, stream := zipfBench()
	s := New(DefaultCapacity)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(keys[stream[i&(1<<20-1)]], 1)
		i++
	}
}

// BenchmarkAddZipfParallel: the same on every core; the heaviest keys'
// shards are the contended ones.
func BenchmarkAddZipfParallel(b *testing.B) {
	keys, stream := zipfBench()
	s := New(DefaultCapacity)
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919 // each goroutine starts elsewhere
		for pb.Next() {
			s.Add(keys[stream[i&(1<<20-1)]], 1)
			i++
		}
	})
}

// BenchmarkTop10: Top(10) of a full DefaultCapacity sketch.
func BenchmarkTop10(b *testing.B) {
	keys, stream := zipfBench()
	s := New(DefaultCapacity)
	for _, i := range stream {
		s.Add(keys[i], 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Top(10)
	}
	b.ReportMetric(float64(s.Bytes()), "sketch-bytes")
}
