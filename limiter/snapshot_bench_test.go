package limiter

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// snapLimiter is a limiter of one sliding window holding n keys, each
// with a request at base, and the keys.
func snapLimiter(b *testing.B, n int) (*Limiter, []string) {
	l := mustNew(b, Config{Limits: []Limit{{1e9, time.Hour}}, MaxKeys: 2 * n})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
		l.AllowAt(keys[i], base, 1)
	}
	return l, keys
}

// BenchmarkSnapshot is the cost of a snapshot interval: encoding the keys
// changed since the last snapshot (a delta) in a limiter of 10k, 100k
// and 1M keys, with 1%, 10% or 100% of them changed (spread over the
// shards), and a full snapshot. bytes/op is the size written. The
// requests that change the keys are not timed.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		l, keys := snapLimiter(b, n)
		var buf []byte
		for _, pct := range []int{1, 10, 100, 0} {
			name := fmt.Sprintf("keys=%d/changed=%d%%", n, pct)
			if pct == 0 {
				name = fmt.Sprintf("keys=%d/full", n)
			}
			b.Run(name, func(b *testing.B) {
				buf, _ = l.AppendSnapshot(buf[:0], base, true) // every key clean
				for b.Loop() {
					if pct > 0 {
						b.StopTimer()
						for i := 0; i < n; i += 100 / pct {
							l.AllowAt(keys[i], base, 1)
						}
						b.StartTimer()
					}
					buf, _ = l.AppendSnapshot(buf[:0], base, pct == 0)
				}
				b.ReportMetric(float64(len(buf)), "bytes/op")
			})
		}
	}
}

// BenchmarkRestore is a restore of 1M keys: decoding a full snapshot and
// putting its keys into a new limiter.
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	l, _ := snapLimiter(b, n)
	snap := full(l, base)
	cfg := l.Config()
	b.ReportMetric(float64(len(snap)), "snapshot-bytes")
	for b.Loop() {
		r := NewRestore(base)
		if err := r.Add(snap); err != nil {
			b.Fatal(err)
		}
		m := mustNew(b, cfg)
		if got, err := r.Into(m); err != nil || got != n {
			b.Fatalf("restored %d, %v", got, err)
		}
	}
}
