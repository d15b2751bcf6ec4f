package gossip

import (
	"testing"
	"time"
)

// rescaleCall is one call of a rule's Rescale.
type rescaleCall struct {
	key      string
	from, to float64
}

// A bucket rule (Rescale set) of a window of RescaleMinWindow or more has
// its state moved with its share: from the cold share to the table's
// share at its first request on a node that follows the key from the
// others' reports, and from the old share to the new one whenever the
// share in force changes; its reports carry its use. A bucket of a 1 s
// window gets neither (its figures stay what they were).
func TestSharingRescale(t *testing.T) {
	for _, w := range []time.Duration{time.Second, time.Hour} {
		var calls []rescaleCall
		rule := Rule{
			Name: "bucket", Window: w,
			Demand:  func(string) uint64 { return 2 },
			Used:    func(string, time.Time, float64) uint64 { return 7 },
			Rescale: func(key string, _ time.Time, from, to float64) { calls = append(calls, rescaleCall{key, from, to}) },
		}
		id := KeyHash(rule.Name)
		b := NewSharing(SharingConfig{Self: "b", Interval: sharingInterval})
		b.SetClusterSize(3)
		b.SetRules([]Rule{rule})
		b.Tick(sharingT0)
		cold := b.Stats(sharingT0).ColdShare

		// a reports the key hot, using 20 of its 30
		now := sharingAt(50 * time.Millisecond)
		b.Observe(Report{Node: "a", Seq: 1, IntervalMillis: 100, Entries: []Entry{
			{Rule: id, Key: KeyHash("k"), Limit: 30, Demand: 10, Admitted: 20},
		}}, now)
		share, tracked := b.ShareAt(id, "k", 30, now)
		if !tracked || share >= cold {
			t.Fatalf("%v: b's share %v (tracked %v), want under the cold %v", w, share, tracked, cold)
		}
		want := []rescaleCall{{"k", cold, share}}
		if w < RescaleMinWindow {
			want = nil
		}
		if len(calls) != len(want) || len(want) > 0 && calls[0] != want[0] {
			t.Fatalf("%v: Rescale calls %+v, want %+v", w, calls, want)
		}

		// b's reports: its use, for the long window only; every change
		// of its share moved the bucket
		prev, changes := share, 0
		for i := 1; i <= 3; i++ {
			r := b.Tick(sharingAt(time.Duration(i) * sharingInterval))
			e, ok := sharingEntry(r, id, "k")
			if wantUsed := uint32(7 * min(1, int(w/RescaleMinWindow))); !ok || e.Admitted != wantUsed {
				t.Fatalf("%v: b's report %+v, want its use %d", w, r.Entries, wantUsed)
			}
			ks, _ := sharingFind(b, id, "k")
			if ks.Share != prev && w >= RescaleMinWindow {
				changes++
				if last := calls[len(calls)-1]; last != (rescaleCall{"k", prev, ks.Share}) {
					t.Fatalf("%v: the share moved %v -> %v, Rescale calls %+v", w, prev, ks.Share, calls)
				}
			}
			prev = ks.Share
		}
		if w >= RescaleMinWindow && (changes == 0 || len(calls) != 1+changes) {
			t.Fatalf("%v: %d changes of the share, Rescale calls %+v", w, changes, calls)
		}
		if w < RescaleMinWindow && len(calls) != 0 {
			t.Fatalf("%v: Rescale called for a 1 s bucket: %+v", w, calls)
		}
	}
}
