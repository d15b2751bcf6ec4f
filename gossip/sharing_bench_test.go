package gossip

import (
	"fmt"
	"testing"
	"time"
)

// Benchmarks of Sharing: Share is on every request of a clustered rule,
// Tick runs once per sync interval.
//
//	go test -run XXX -bench Sharing -benchmem ./gossip/

// benchKeys are the keys the request-path benchmarks ask for, many so
// that lookups do not all hit one cache line.
var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	return keys
}()

// benchSharing returns a Sharing in a cluster of 10 sharing the rule
// "api", whose demand is demand per key and interval.
func benchSharing(demand uint64) *Sharing {
	s := NewSharing(SharingConfig{Self: "a"})
	s.SetRules([]Rule{{Name: sharingRuleName, Window: time.Second, Demand: func(string) uint64 { return demand }}})
	s.SetClusterSize(10)
	s.Tick(sharingT0)
	return s
}

// benchShare runs Share over benchKeys, serially and from parallel
// goroutines, checking it answers tracked as wanted.
func benchShare(b *testing.B, s *Sharing, tracked bool) {
	check := func() {
		if _, got := s.Share(sharingRuleID, benchKeys[0], sharingLimit); got != tracked {
			b.Fatalf("tracked = %v, want %v", got, tracked)
		}
	}
	check()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Share(sharingRuleID, benchKeys[i&(len(benchKeys)-1)], sharingLimit)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				s.Share(sharingRuleID, benchKeys[i&(len(benchKeys)-1)], sharingLimit)
				i++
			}
		})
	})
	check()
}

// Share of keys not tracked: the cold share, the cost of every key that is
// not hot anywhere (a hash and a map miss).
func BenchmarkSharingShareUntracked(b *testing.B) {
	benchShare(b, benchSharing(0), false)
}

// Share of tracked keys whose string was seen here (adopted): a hash, a
// map hit and two atomic loads.
func BenchmarkSharingShareTracked(b *testing.B) {
	s := benchSharing(0)
	for _, key := range benchKeys {
		s.Track(sharingRuleID, key, sharingLimit)
	}
	if st := s.Stats(sharingT0); st.Tracked != len(benchKeys) {
		b.Fatalf("%d keys tracked, want %d", st.Tracked, len(benchKeys))
	}
	benchShare(b, s, true)
}

// Tick with n tracked keys, all hot here (each asks 40 units an interval,
// more than half its cold share of 1000/s × 100ms / 10 nodes): every key
// is measured and reported (up to MaxEntries), fed back to the table, and
// its share recomputed. With peers=9, nine other nodes report the same
// keys (up to MaxEntries) every interval, so that each share is allocated
// between 10 live nodes; observing their reports is not timed. The demand
// comes from a stub, so this is the cost of Sharing alone, not of the
// limiter's TakeDemand.
func BenchmarkSharingTick(b *testing.B) {
	for _, n := range []int{10, 1000, 10_000} {
		for _, peers := range []int{0, 9} {
			b.Run(fmt.Sprintf("keys=%d/peers=%d", n, peers), func(b *testing.B) {
				benchTick(b, n, peers)
			})
		}
	}
}

func benchTick(b *testing.B, n, peers int) {
	s := benchSharing(40)
	entries := make([]Entry, 0, min(n, MaxEntries))
	for i := range n {
		key := fmt.Sprintf("key-%d", i)
		s.Track(sharingRuleID, key, sharingLimit)
		if len(entries) < cap(entries) {
			entries = append(entries, Entry{Rule: sharingRuleID, Key: KeyHash(key), Limit: sharingLimit, Demand: 40})
		}
	}
	now, seq := sharingT0, uint64(0)
	tick := func() Report {
		now = now.Add(100 * time.Millisecond)
		seq++
		for p := range peers {
			s.Observe(Report{Node: fmt.Sprintf("peer-%d", p), Seq: seq, IntervalMillis: 100, Entries: entries}, now)
		}
		return s.Tick(now.Add(time.Millisecond))
	}
	for range 3 { // past the raise delay: the shares are settled
		tick()
	}
	r, st := tick(), s.Stats(now)
	if len(r.Entries) != min(n, MaxEntries) || st.Tracked != n || st.Live != 1+peers {
		b.Fatalf("%d entries reported, %d keys tracked, %d nodes live; want %d, %d, %d",
			len(r.Entries), st.Tracked, st.Live, min(n, MaxEntries), n, 1+peers)
	}
	b.ReportAllocs()
	for b.Loop() {
		if peers > 0 {
			b.StopTimer()
			for p := range peers {
				s.Observe(Report{Node: fmt.Sprintf("peer-%d", p), Seq: seq + 1, IntervalMillis: 100, Entries: entries}, now.Add(100*time.Millisecond))
			}
			b.StartTimer()
		}
		now = now.Add(100 * time.Millisecond)
		seq++
		s.Tick(now.Add(time.Millisecond))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
}

// Observe of one peer's report of n hot keys (at most MaxEntries), in a
// cluster of 10 live nodes that all report them: the receiving side of
// the sync loop, which takes the lock Tick takes. Each entry recomputes
// the key's share.
func BenchmarkSharingObserve(b *testing.B) {
	for _, n := range []int{10, 1000, MaxEntries} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			s := benchSharing(40)
			entries := make([]Entry, n)
			for i := range entries {
				key := fmt.Sprintf("key-%d", i)
				s.Track(sharingRuleID, key, sharingLimit)
				entries[i] = Entry{Rule: sharingRuleID, Key: KeyHash(key), Limit: sharingLimit, Demand: 40}
			}
			now := sharingT0
			for seq := range uint64(3) {
				now = now.Add(100 * time.Millisecond)
				for p := range 9 {
					s.Observe(Report{Node: fmt.Sprintf("peer-%d", p), Seq: seq + 1, IntervalMillis: 100, Entries: entries}, now)
				}
				s.Tick(now)
			}
			if st := s.Stats(now); st.Live != 10 {
				b.Fatalf("%d nodes live, want 10", st.Live)
			}
			r := Report{Node: "peer-0", Seq: 3, IntervalMillis: 100, Entries: entries}
			b.ReportAllocs()
			for b.Loop() {
				r.Seq++ // a new report: not ignored as old
				for i := range entries {
					// every other report raises the demand of every key: a
					// worst case, each entry then a possible cut computed at once
					entries[i].Demand = 40 + uint32(r.Seq%2)
				}
				s.Observe(r, now)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}
