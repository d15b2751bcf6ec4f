package gossip

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// The tests of Sharing run in virtual time: a base instant plus offsets,
// never the clock. Each node is a Sharing in front of a real
// limiter.Limiter (Config.Shares), whose TakeDemand is the rule's Demand,
// the way the simulator (gossip/sim) and the Caddy module wire them.

var sharingT0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func sharingAt(d time.Duration) time.Time { return sharingT0.Add(d) }

const (
	sharingRuleName = "api"
	sharingLimit    = 1000 // the rule's global limit, units per second
	sharingInterval = 100 * time.Millisecond
	sharingEps      = 1e-9
)

var sharingRuleID = KeyHash(sharingRuleName)

// sharingNode is one node of a test cluster.
type sharingNode struct {
	name string
	lim  *limiter.Limiter
	sh   *Sharing
}

// newSharingNode returns a node enforcing sharingLimit per second times
// its share with alg, sharing the rule "api" (and the extra rules given,
// with the same limiter) in a cluster of size nodes.
func newSharingNode(t testing.TB, cfg SharingConfig, size int, alg limiter.Algorithm, extra ...string) *sharingNode {
	t.Helper()
	lim, err := limiter.New(limiter.Config{
		Algorithm: alg,
		Limits:    []limiter.Limit{{Count: sharingLimit, Window: time.Second}},
		Shares:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Interval == 0 {
		cfg.Interval = sharingInterval
	}
	n := &sharingNode{name: cfg.Self, lim: lim, sh: NewSharing(cfg)}
	n.sh.SetClusterSize(size)
	n.sh.SetRules(n.rules(append([]string{sharingRuleName}, extra...)...))
	return n
}

// rules returns the named rules, each counting demand in n's limiter.
func (n *sharingNode) rules(names ...string) []Rule {
	var rs []Rule
	for _, name := range names {
		rs = append(rs, Rule{Name: name, Window: time.Second, Demand: func(key string) uint64 {
			d, _ := n.lim.TakeDemand(key)
			return d
		}})
	}
	return rs
}

// ask sends count requests for key at now through the request path
// without ever calling Track: Share, then the limiter scaled by the share.
// It returns how many were allowed.
func (n *sharingNode) ask(key string, count int, now time.Time) int {
	allowed := 0
	for range count {
		share, _ := n.sh.Share(sharingRuleID, key, sharingLimit)
		if n.lim.AllowScaledAt(key, now, 1, share).Allowed {
			allowed++
		}
	}
	return allowed
}

// serve is ask with the full request path: a key not tracked whose
// decision left less than half of its share is tracked.
func (n *sharingNode) serve(key string, count int, now time.Time) {
	for range count {
		share, tracked := n.sh.Share(sharingRuleID, key, sharingLimit)
		d := n.lim.AllowScaledAt(key, now, 1, share)
		if q := d.Quotas[0]; !tracked && 2*q.Remaining <= q.Limit {
			n.sh.Track(sharingRuleID, key, sharingLimit)
		}
	}
}

// inForce is the share of key of the rule "api" in force on s, read
// without the side effect of Share (which would make s see the key).
func sharingInForce(s *Sharing, key string, now time.Time) float64 {
	if ks, ok := sharingFind(s, sharingRuleID, key); ok {
		return ks.Share
	}
	return s.Stats(now).ColdShare
}

func sharingFind(s *Sharing, rule uint64, key string) (KeyShare, bool) {
	for _, ks := range s.Shares(0) {
		if ks.Rule == rule && ks.Hash == KeyHash(key) {
			return ks, true
		}
	}
	return KeyShare{}, false
}

func sharingEntry(r Report, rule uint64, key string) (Entry, bool) {
	for _, e := range r.Entries {
		if e.Rule == rule && e.Key == KeyHash(key) {
			return e, true
		}
	}
	return Entry{}, false
}

func sharingNear(a, b float64) bool { return math.Abs(a-b) <= sharingEps }

// A Sharing alone in its cluster gives every key the whole limit and
// follows none; the cluster size sets the cold share, (1+10%)/N, from the
// next Tick on.
func TestSharingAlone(t *testing.T) {
	s := NewSharing(SharingConfig{Self: "a"})
	for _, key := range []string{"k", "", "10.0.0.1"} {
		for _, rule := range []uint64{sharingRuleID, KeyHash("not shared")} {
			if share, tracked := s.Share(rule, key, sharingLimit); share != 1 || tracked {
				t.Fatalf("Share(%x, %q) = %v, %v; want 1, false", rule, key, share, tracked)
			}
		}
	}
	st := s.Stats(sharingT0)
	if st != (SharingStats{Tracked: 0, ColdShare: 1, Live: 1, Minority: false, Full: 0}) {
		t.Fatalf("stats alone: %+v", st)
	}
	if ks := s.Shares(0); len(ks) != 0 {
		t.Fatalf("shares alone: %+v", ks)
	}

	s.SetClusterSize(10)
	if share, _ := s.Share(sharingRuleID, "k", sharingLimit); !sharingNear(share, 1.1/10) {
		t.Fatalf("cold share after SetClusterSize(10): %v, want 0.11 at once", share)
	}
	r := s.Tick(sharingT0)
	if r.Node != "a" || r.Seq != 1 || r.IntervalMillis != 100 || len(r.Entries) != 0 {
		t.Fatalf("first report: %+v", r)
	}
	share, tracked := s.Share(sharingRuleID, "k", sharingLimit)
	if !sharingNear(share, 1.1/10) || tracked {
		t.Fatalf("cluster of 10: Share = %v, %v; want 0.11, false", share, tracked)
	}
	st = s.Stats(sharingT0)
	// Alone among 10 is a minority, but nobody went silent: under the
	// default LocalShare the cold share stands.
	if !sharingNear(st.ColdShare, 0.11) || st.Live != 1 || !st.Minority || st.Tracked != 0 {
		t.Fatalf("stats in a cluster of 10: %+v", st)
	}

	// A size below 1 counts as 1.
	s.SetClusterSize(0)
	if r := s.Tick(sharingAt(sharingInterval)); r.Seq != 2 {
		t.Fatalf("second report: %+v", r)
	}
	if share, _ := s.Share(sharingRuleID, "k", sharingLimit); share != 1 {
		t.Fatalf("cluster of 0: Share = %v, want 1", share)
	}
}

// Track, then Tick: a key followed is measured from Track on, and reported
// when it asks at least half of its share of an interval; one that asks
// less stays followed but unreported; keys never tracked cost nothing.
func TestSharingTrackAndReport(t *testing.T) {
	t.Run("reported", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 10, limiter.SlidingWindow)
		n.sh.Tick(sharingT0) // cold share 0.11: half of it per interval is 5.5 units
		// Asked before Track: not counted.
		if got := n.ask("hot", 50, sharingAt(10*time.Millisecond)); got != 50 {
			t.Fatalf("allowed %d of 50 under a cold limit of 110", got)
		}
		n.sh.Track(sharingRuleID, "hot", sharingLimit)
		n.sh.Track(sharingRuleID, "warm", sharingLimit)
		n.sh.Track(sharingRuleID, "hot", sharingLimit) // tracked already: no-op
		if st := n.sh.Stats(sharingT0); st.Tracked != 2 || st.Full != 0 {
			t.Fatalf("stats after Track: %+v", st)
		}
		for _, key := range []string{"hot", "warm"} {
			ks, ok := sharingFind(n.sh, sharingRuleID, key)
			if !ok || ks.Key != key || !sharingNear(ks.Share, 0.11) || ks.Hot {
				t.Fatalf("%s after Track: %+v, %v", key, ks, ok)
			}
			if share, tracked := n.sh.Share(sharingRuleID, key, sharingLimit); !sharingNear(share, 0.11) || !tracked {
				t.Fatalf("Share(%s) after Track = %v, %v", key, share, tracked)
			}
		}

		n.ask("hot", 6, sharingAt(50*time.Millisecond))  // ≥ 5.5: reported
		n.ask("warm", 5, sharingAt(50*time.Millisecond)) // < 5.5: not
		r := n.sh.Tick(sharingAt(sharingInterval))
		want := Entry{Rule: KeyHash(sharingRuleName), Key: KeyHash("hot"), Limit: sharingLimit, Demand: 6}
		if len(r.Entries) != 1 || r.Entries[0] != want {
			t.Fatalf("report: %+v, want the one entry %+v", r.Entries, want)
		}
		if r.Node != "a" || r.Seq != 2 || r.IntervalMillis != 100 {
			t.Fatalf("report header: %+v", r)
		}
		if ks, _ := sharingFind(n.sh, sharingRuleID, "hot"); !ks.Hot {
			t.Fatalf("hot not marked reported: %+v", ks)
		}
		if ks, ok := sharingFind(n.sh, sharingRuleID, "warm"); !ok || ks.Hot {
			t.Fatalf("warm: %+v, %v; want tracked, not reported", ks, ok)
		}

		// A key asked 5 per interval, under half its cold share, is never
		// reported, however long it lasts.
		for i := 2; i < 20; i++ {
			now := sharingAt(time.Duration(i) * sharingInterval)
			n.ask("warm", 5, now.Add(-time.Millisecond))
			if _, ok := sharingEntry(n.sh.Tick(now), sharingRuleID, "warm"); ok {
				t.Fatalf("interval %d: warm reported", i)
			}
		}
		if ks, ok := sharingFind(n.sh, sharingRuleID, "warm"); !ok || ks.Hot || !sharingNear(ks.Share, 0.11) {
			t.Fatalf("warm at the end: %+v, %v", ks, ok)
		}
	})

	t.Run("limit as given", func(t *testing.T) {
		// Entry.Limit is the limit Track was given (a geo or tier scale
		// applied), and the half-share test uses it: alone (share 1), 6
		// units in an interval are more than half of 100/s but not of
		// 1000/s.
		n := newSharingNode(t, SharingConfig{Self: "a"}, 1, limiter.SlidingWindow)
		n.sh.Tick(sharingT0)
		n.sh.Track(sharingRuleID, "small", 100)
		n.sh.Track(sharingRuleID, "large", 1000)
		n.ask("small", 6, sharingAt(time.Millisecond))
		n.ask("large", 6, sharingAt(time.Millisecond))
		r := n.sh.Tick(sharingAt(sharingInterval))
		want := Entry{Rule: sharingRuleID, Key: KeyHash("small"), Limit: 100, Demand: 6}
		if len(r.Entries) != 1 || r.Entries[0] != want {
			t.Fatalf("report %+v, want the one entry %+v", r.Entries, want)
		}
	})

	t.Run("untracked costs nothing", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 10, limiter.SlidingWindow)
		for i := range 20 {
			now := sharingAt(time.Duration(i) * sharingInterval)
			for k := range 100 {
				n.ask(fmt.Sprintf("k%d", k), 3, now)
			}
			if r := n.sh.Tick(now.Add(sharingInterval / 2)); len(r.Entries) != 0 {
				t.Fatalf("interval %d: report of untracked keys: %+v", i, r.Entries)
			}
		}
		if ks := n.sh.Shares(0); len(ks) != 0 {
			t.Fatalf("shares: %+v", ks)
		}
		if st := n.sh.Stats(sharingT0); st.Tracked != 0 || st.Full != 0 {
			t.Fatalf("stats: %+v", st)
		}
	})

	t.Run("request path tracks", func(t *testing.T) {
		// The request path tracks a key once a decision leaves it less
		// than half of its (cold) share: 55 of 110 here.
		n := newSharingNode(t, SharingConfig{Self: "a"}, 10, limiter.SlidingWindow)
		n.sh.Tick(sharingT0)
		n.serve("k", 54, sharingAt(time.Millisecond))
		if _, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit); tracked {
			t.Fatal("tracked after 54 of 110")
		}
		n.serve("k", 1, sharingAt(time.Millisecond))
		if _, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit); !tracked {
			t.Fatal("not tracked after 55 of 110")
		}
	})
}

// Two nodes exchange their reports; all the traffic is on A, then moves
// to B. The share follows the traffic: the busy node gets all of the
// limit but the idle node's floor (DefaultFloor split between the two),
// raises wait one interval, cuts apply at once, and the shares in force
// never sum above 1.
func TestSharingTwoNodesFollowTraffic(t *testing.T) {
	// The cluster has 3 nodes; the third never starts. Two cold shares sum
	// to 2×1.1/3 < 1, so the sum stays below 1 from the first step.
	const size = 3
	cold := 1.1 / size
	a := newSharingNode(t, SharingConfig{Self: "a"}, size, limiter.TokenBucket)
	b := newSharingNode(t, SharingConfig{Self: "b"}, size, limiter.TokenBucket)
	const key = "user-42"
	busy, idle := 1-DefaultFloor/2, DefaultFloor/2

	check := func(step string, now time.Time) (sa, sb float64) {
		t.Helper()
		sa, sb = sharingInForce(a.sh, key, now), sharingInForce(b.sh, key, now)
		if sa < 0 || sb < 0 || sa+sb > 1+sharingEps {
			t.Fatalf("%s: shares a %v + b %v = %v > 1", step, sa, sb, sa+sb)
		}
		return sa, sb
	}
	// One interval: traffic on the busy node, A ticks at +40ms, B hears
	// it at +45ms, B ticks at +90ms, A hears it at +95ms.
	type step struct{ ra, rb Report }
	run := func(k int, on *sharingNode, perInterval int) step {
		t.Helper()
		ts := sharingAt(time.Duration(k) * sharingInterval)
		on.serve(key, perInterval, ts)
		var s step
		s.ra = a.sh.Tick(ts.Add(40 * time.Millisecond))
		check(fmt.Sprintf("interval %d, a ticked", k), ts.Add(40*time.Millisecond))
		b.sh.Observe(s.ra, ts.Add(45*time.Millisecond))
		check(fmt.Sprintf("interval %d, b heard a", k), ts.Add(45*time.Millisecond))
		s.rb = b.sh.Tick(ts.Add(90 * time.Millisecond))
		check(fmt.Sprintf("interval %d, b ticked", k), ts.Add(90*time.Millisecond))
		a.sh.Observe(s.rb, ts.Add(95*time.Millisecond))
		check(fmt.Sprintf("interval %d, a heard b", k), ts.Add(95*time.Millisecond))
		return s
	}

	// Both nodes started: their first Tick sets the cold share (1 until
	// then, as if alone), and they hear from each other.
	ra, rb := a.sh.Tick(sharingT0), b.sh.Tick(sharingT0)
	a.sh.Observe(rb, sharingAt(5*time.Millisecond))
	b.sh.Observe(ra, sharingAt(5*time.Millisecond))
	if sa, sb := check("started", sharingAt(5*time.Millisecond)); !sharingNear(sa, cold) || !sharingNear(sb, cold) {
		t.Fatalf("cold shares %v, %v; want %v", sa, sb, cold)
	}

	// Phase 1: 2×L on A.
	first := -1
	for k := range 10 {
		s := run(k, a, 200)
		now := sharingAt(time.Duration(k+1)*sharingInterval - time.Millisecond)
		sa, sb := check("end of interval", now)
		if _, ok := sharingEntry(s.rb, sharingRuleID, key); ok {
			t.Fatalf("interval %d: b reported a key it never saw", k)
		}
		if _, ok := sharingEntry(s.ra, sharingRuleID, key); ok && first < 0 {
			first = k
			// The raise waits one interval; B's cut applied at once.
			if !sharingNear(sa, cold) || !sharingNear(sb, idle) {
				t.Fatalf("interval %d, first report: a %v (want the cold %v), b %v (want %v)", k, sa, cold, sb, idle)
			}
			continue
		}
		t.Logf("interval %d: a %.4f, b %.4f", k, sa, sb)
		if first >= 0 && (!sharingNear(sa, busy) || !sharingNear(sb, idle)) {
			t.Fatalf("interval %d (first report at %d): a %v, b %v; want %v, %v", k, first, sa, sb, busy, idle)
		}
	}
	if first < 0 || first > 1 {
		t.Fatalf("a first reported the key at interval %d", first)
	}
	if ks, ok := sharingFind(b.sh, sharingRuleID, key); !ok || ks.Key != "" {
		t.Fatalf("b: %+v, %v; want tracked, key not seen", ks, ok)
	}

	// Phase 2: the traffic moves to B. From B's first Tick with it, its
	// share rises (after the raise delay) while A's falls.
	prevA, prevB := busy, idle
	for k := 10; k < 20; k++ {
		run(k, b, 200)
		sa, sb := check("end of interval", sharingAt(time.Duration(k+1)*sharingInterval-time.Millisecond))
		t.Logf("interval %d: a %.4f, b %.4f", k, sa, sb)
		if sb < prevB-sharingEps || sa > prevA+sharingEps {
			t.Fatalf("interval %d: b's share went from %v to %v, a's from %v to %v", k, prevB, sb, prevA, sa)
		}
		// Interval 10: A's cut follows B's report at once, B's raise
		// waits; from interval 11 the split is the mirror of phase 1.
		if k >= 11 && (!sharingNear(sa, idle) || !sharingNear(sb, busy)) {
			t.Fatalf("interval %d: a %v, b %v; want %v, %v", k, sa, sb, idle, busy)
		}
		prevA, prevB = sa, sb
	}
}

// A key hot on another node is followed here without its string; the
// first request for it here gets the table's share at once, and from then
// on its demand here is measured and reported.
func TestSharingHotElsewhere(t *testing.T) {
	const size = 10
	a := newSharingNode(t, SharingConfig{Self: "a"}, size, limiter.SlidingWindow)
	b := newSharingNode(t, SharingConfig{Self: "b"}, size, limiter.SlidingWindow)
	a.sh.Tick(sharingT0)
	b.sh.Tick(sharingT0)
	const key = "10.1.2.3"

	// B sees the key a little before it is hot anywhere: cold, untracked.
	if got := b.ask(key, 40, sharingAt(10*time.Millisecond)); got != 40 {
		t.Fatalf("b allowed %d of 40", got)
	}
	if _, tracked := b.sh.Share(sharingRuleID, key, sharingLimit); tracked {
		t.Fatal("b tracks a key that came nowhere near its share")
	}

	a.sh.Track(sharingRuleID, key, sharingLimit)
	a.ask(key, 300, sharingAt(20*time.Millisecond))
	ra := a.sh.Tick(sharingAt(sharingInterval))
	if e, ok := sharingEntry(ra, sharingRuleID, key); !ok || e.Demand != 300 {
		t.Fatalf("a's report: %+v", ra.Entries)
	}
	now := sharingAt(sharingInterval + 5*time.Millisecond)
	b.sh.Observe(ra, now)

	ks, ok := sharingFind(b.sh, sharingRuleID, key)
	want := KeyShare{Rule: sharingRuleID, Key: "", Hash: KeyHash(key), Share: DefaultFloor / 2, Hot: false}
	if !ok || ks.Key != "" || ks.Hash != want.Hash || !sharingNear(ks.Share, want.Share) || ks.Hot {
		t.Fatalf("b follows %+v, %v; want %+v", ks, ok, want)
	}
	if st := b.sh.Stats(now); st.Tracked != 1 || st.Live != 2 {
		t.Fatalf("b's stats: %+v", st)
	}
	// B's report carries nothing of it while B has not seen it.
	if rb := b.sh.Tick(sharingAt(150 * time.Millisecond)); len(rb.Entries) != 0 {
		t.Fatalf("b reports a key it never saw: %+v", rb.Entries)
	}

	// The first request on B: the table's share, not the cold 0.11.
	share, tracked := b.sh.Share(sharingRuleID, key, sharingLimit)
	if !tracked || !sharingNear(share, DefaultFloor/2) {
		t.Fatalf("first Share on b = %v, %v; want %v, true", share, tracked, DefaultFloor/2)
	}
	if ks, _ := sharingFind(b.sh, sharingRuleID, key); ks.Key != key {
		t.Fatalf("b did not record the key: %+v", ks)
	}
	// From then on B measures its demand: the 40 units asked before are
	// not counted, the 30 after are.
	b.ask(key, 30, sharingAt(160*time.Millisecond))
	rb := b.sh.Tick(sharingAt(250 * time.Millisecond))
	e, ok := sharingEntry(rb, sharingRuleID, key)
	wantE := Entry{Rule: sharingRuleID, Key: KeyHash(key), Limit: sharingLimit, Demand: 30}
	if !ok || e != wantE {
		t.Fatalf("b's report: %+v; want %+v", rb.Entries, wantE)
	}
	if ks, _ := sharingFind(b.sh, sharingRuleID, key); !ks.Hot {
		t.Fatalf("b's key not marked reported: %+v", ks)
	}

	// A key reported elsewhere with too little demand to be hot (total
	// under half the cold share) is not followed.
	b.sh.Observe(Report{Node: "c", Seq: 1, IntervalMillis: 100, Entries: []Entry{
		{Rule: sharingRuleID, Key: KeyHash("tepid"), Limit: sharingLimit, Demand: 5},
	}}, sharingAt(260*time.Millisecond))
	if _, ok := sharingFind(b.sh, sharingRuleID, "tepid"); ok {
		t.Fatal("b follows a key asked 50/s of 1000/s in a cluster of 10")
	}
}

// Only the rules given to SetRules are shared: Observe ignores the others,
// and the keys of a rule removed are forgotten at the next Tick.
func TestSharingRules(t *testing.T) {
	other := KeyHash("other")
	t.Run("observe ignores unknown rules", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 3, limiter.SlidingWindow)
		n.sh.Tick(sharingT0)
		n.sh.Observe(Report{Node: "b", Seq: 1, IntervalMillis: 100, Entries: []Entry{
			{Rule: other, Key: KeyHash("k"), Limit: sharingLimit, Demand: 200},
			{Rule: sharingRuleID, Key: KeyHash("k"), Limit: sharingLimit, Demand: 200},
		}}, sharingAt(10*time.Millisecond))
		ks := n.sh.Shares(0)
		if len(ks) != 1 || ks[0].Rule != sharingRuleID || ks[0].Hash != KeyHash("k") {
			t.Fatalf("shares: %+v", ks)
		}
		if share, tracked := n.sh.Share(other, "k", sharingLimit); tracked || !sharingNear(share, 1.1/3) {
			t.Fatalf("Share of a rule not shared = %v, %v", share, tracked)
		}
		// The report still counts for liveness.
		if st := n.sh.Stats(sharingAt(10 * time.Millisecond)); st.Live != 2 || st.Tracked != 1 {
			t.Fatalf("stats: %+v", st)
		}
	})

	t.Run("removed rule forgotten at next Tick", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 1, limiter.SlidingWindow, "other")
		n.sh.Track(sharingRuleID, "k", sharingLimit)
		n.sh.Track(other, "j", sharingLimit)
		n.lim.AllowAt("k", sharingAt(time.Millisecond), 100)
		n.lim.AllowAt("j", sharingAt(time.Millisecond), 100)
		r := n.sh.Tick(sharingAt(sharingInterval))
		if len(r.Entries) != 2 {
			t.Fatalf("report: %+v, want both keys", r.Entries)
		}
		if st := n.sh.Stats(sharingT0); st.Tracked != 2 {
			t.Fatalf("tracked %d, want 2", st.Tracked)
		}

		n.sh.SetRules(n.rules(sharingRuleName))
		if st := n.sh.Stats(sharingT0); st.Tracked != 2 {
			t.Fatalf("tracked %d before the Tick, want 2", st.Tracked)
		}
		n.lim.AllowAt("k", sharingAt(150*time.Millisecond), 100)
		n.lim.AllowAt("j", sharingAt(150*time.Millisecond), 100)
		r = n.sh.Tick(sharingAt(2 * sharingInterval))
		if _, ok := sharingEntry(r, other, "j"); ok {
			t.Fatalf("report carries a removed rule: %+v", r.Entries)
		}
		ks := n.sh.Shares(0)
		if len(ks) != 1 || ks[0].Rule != sharingRuleID {
			t.Fatalf("shares after the Tick: %+v", ks)
		}
		if st := n.sh.Stats(sharingT0); st.Tracked != 1 {
			t.Fatalf("tracked %d after the Tick, want 1", st.Tracked)
		}
		if _, tracked := n.sh.Share(other, "j", sharingLimit); tracked {
			t.Fatal("key of the removed rule still tracked")
		}

		// Tracking a key of a rule not shared is undone by the next Tick.
		n.sh.Track(KeyHash("nope"), "k", sharingLimit)
		n.sh.Tick(sharingAt(3 * sharingInterval))
		if _, ok := sharingFind(n.sh, KeyHash("nope"), "k"); ok {
			t.Fatal("key of an unknown rule still tracked after a Tick")
		}
	})
}

// MaxKeys bounds the keys followed: Track past it is refused (counted in
// Stats().Full), and so are keys hot elsewhere; room comes back as keys
// are forgotten.
func TestSharingMaxKeys(t *testing.T) {
	n := newSharingNode(t, SharingConfig{Self: "a", MaxKeys: 3}, 3, limiter.SlidingWindow)
	n.sh.Tick(sharingT0)
	for i := range 5 {
		n.sh.Track(sharingRuleID, fmt.Sprintf("k%d", i), sharingLimit)
	}
	n.sh.Track(sharingRuleID, "k0", sharingLimit) // tracked: neither refused nor counted
	st := n.sh.Stats(sharingT0)
	if st.Tracked != 3 || st.Full != 2 {
		t.Fatalf("after 5 Tracks with MaxKeys 3: %+v", st)
	}
	if len(n.sh.Shares(0)) != 3 || len(n.sh.Shares(2)) != 2 {
		t.Fatal("Shares does not list 3 keys, or ignores its bound")
	}
	for i, want := range []bool{true, true, true, false, false} {
		if _, tracked := n.sh.Share(sharingRuleID, fmt.Sprintf("k%d", i), sharingLimit); tracked != want {
			t.Fatalf("k%d tracked %v", i, tracked)
		}
	}

	// Keys hot elsewhere are refused too, silently.
	n.sh.Observe(Report{Node: "b", Seq: 1, IntervalMillis: 100, Entries: []Entry{
		{Rule: sharingRuleID, Key: KeyHash("remote"), Limit: sharingLimit, Demand: 200},
	}}, sharingAt(10*time.Millisecond))
	if st := n.sh.Stats(sharingT0); st.Tracked != 3 || st.Full != 2 {
		t.Fatalf("after a remote hot key: %+v", st)
	}
	if _, ok := sharingFind(n.sh, sharingRuleID, "remote"); ok {
		t.Fatal("remote key tracked past MaxKeys")
	}

	// No demand: the keys are forgotten at the next Tick, and Track works
	// again.
	n.sh.Tick(sharingAt(sharingInterval))
	if st := n.sh.Stats(sharingT0); st.Tracked != 0 {
		t.Fatalf("idle keys kept: %+v", st)
	}
	n.sh.Track(sharingRuleID, "k4", sharingLimit)
	if st := n.sh.Stats(sharingT0); st.Tracked != 1 || st.Full != 2 {
		t.Fatalf("after room came back: %+v", st)
	}
}

// A key whose traffic stops is forgotten once its smoothed demand reaches
// 0: at once after a fall by more than half, gradually after a small one.
// It then has the cold share again, untracked.
func TestSharingForgetsIdleKeys(t *testing.T) {
	t.Run("fall", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 1, limiter.SlidingWindow)
		n.sh.Track(sharingRuleID, "k", sharingLimit)
		for i := range 5 {
			now := sharingAt(time.Duration(i) * sharingInterval)
			n.ask("k", 100, now)
			if _, ok := sharingEntry(n.sh.Tick(now.Add(50*time.Millisecond)), sharingRuleID, "k"); !ok {
				t.Fatalf("interval %d: not reported", i)
			}
		}
		r := n.sh.Tick(sharingAt(5*sharingInterval + 50*time.Millisecond))
		if len(r.Entries) != 0 {
			t.Fatalf("idle key reported: %+v", r.Entries)
		}
		if share, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit); tracked || share != 1 {
			t.Fatalf("after the traffic stopped: %v, %v; want 1, false", share, tracked)
		}
		if st := n.sh.Stats(sharingT0); st.Tracked != 0 {
			t.Fatalf("stats: %+v", st)
		}
	})

	t.Run("decay", func(t *testing.T) {
		n := newSharingNode(t, SharingConfig{Self: "a"}, 10, limiter.SlidingWindow)
		n.sh.Tick(sharingT0)
		n.sh.Track(sharingRuleID, "k", sharingLimit)
		// 4 per interval: below the report threshold (5.5), tracked.
		for i := 1; i <= 10; i++ {
			now := sharingAt(time.Duration(i) * sharingInterval)
			n.ask("k", 4, now.Add(-time.Millisecond))
			if len(n.sh.Tick(now).Entries) != 0 {
				t.Fatalf("interval %d: reported", i)
			}
		}
		idle := 0
		for ; idle < 30; idle++ {
			if _, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit); !tracked {
				break
			}
			n.sh.Tick(sharingAt(time.Duration(11+idle) * sharingInterval))
		}
		// 4 an interval from the first (a key's first interval is its
		// smoothed demand): it decays by 10% an interval (rateSmoothing)
		// and counts as 0 below 0.5 with none asked: 4×0.9^20 < 0.5.
		if idle != 20 {
			t.Fatalf("forgotten after %d idle intervals", idle)
		}
		if share, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit); tracked || !sharingNear(share, 0.11) {
			t.Fatalf("after the decay: %v, %v; want 0.11, false", share, tracked)
		}
		t.Logf("forgotten after %d idle intervals", idle)
	})
}

// Share and Track run on the request path, concurrently with the sync
// loop's Tick and Observe and with inspection. Run with -race.
func TestSharingConcurrent(t *testing.T) {
	const (
		workers  = 8
		requests = 3000
		rounds   = 300
		keys     = 64
		maxKeys  = 32
	)
	nodes := []*sharingNode{
		newSharingNode(t, SharingConfig{Self: "a", MaxKeys: maxKeys}, 2, limiter.SlidingWindow),
		newSharingNode(t, SharingConfig{Self: "b", MaxKeys: maxKeys}, 2, limiter.TokenBucket),
	}
	span := rounds * sharingInterval // the virtual time both sides cover
	var wg sync.WaitGroup
	var working sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		working.Add(1)
		go func() {
			defer wg.Done()
			defer working.Done()
			n := nodes[w%2]
			for i := range requests {
				key := fmt.Sprintf("k%d", (i*7+w)%keys)
				if i%3 == 0 {
					key = "hot" // one key hot on both nodes
				}
				n.serve(key, 1, sharingAt(span*time.Duration(i)/requests))
				if i%97 == 0 {
					n.sh.Track(sharingRuleID, key, sharingLimit)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { working.Wait(); close(done) }()
	entries := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		// At least rounds rounds, and on until the workers are done (at
		// most 100 times more).
		for r := 0; r < 100*rounds; r++ {
			if r >= rounds {
				select {
				case <-done:
					return
				default:
				}
			}
			now := sharingAt(time.Duration(r) * sharingInterval)
			a, b := nodes[0], nodes[1]
			ra := a.sh.Tick(now)
			b.sh.Observe(ra, now.Add(5*time.Millisecond))
			rb := b.sh.Tick(now.Add(50 * time.Millisecond))
			a.sh.Observe(rb, now.Add(55*time.Millisecond))
			entries += len(ra.Entries) + len(rb.Entries)
			for _, n := range nodes {
				n.sh.Shares(10)
				n.sh.Stats(now)
				if r%50 == 49 {
					n.sh.SetClusterSize(2 + r%3)
					n.sh.SetRules(n.rules(sharingRuleName))
				}
			}
		}
	}()
	wg.Wait()
	t.Logf("%d entries reported", entries)

	check := func(when string) {
		t.Helper()
		for _, n := range nodes {
			ks := n.sh.Shares(0)
			st := n.sh.Stats(sharingAt(span))
			if st.Tracked != len(ks) {
				t.Fatalf("%s, %s: Tracked %d, %d listed", when, n.name, st.Tracked, len(ks))
			}
			// The check of MaxKeys is not atomic with the insertion: each
			// concurrent Track may pass it.
			if st.Tracked > maxKeys+workers {
				t.Fatalf("%s, %s: %d keys tracked, MaxKeys %d", when, n.name, st.Tracked, maxKeys)
			}
			for _, k := range ks {
				if !(k.Share >= 0 && k.Share <= 1) {
					t.Fatalf("%s, %s: share %+v", when, n.name, k)
				}
			}
		}
	}
	check("after the run")
	for _, n := range nodes {
		hot := 0
		for _, k := range n.sh.Shares(0) {
			if k.Hot {
				hot++
			}
		}
		t.Logf("%s after the run: %+v, %d keys reported", n.name, n.sh.Stats(sharingAt(span)), hot)
	}
	// Without traffic every key is forgotten.
	for r := range 30 {
		now := sharingAt(span + time.Duration(r)*sharingInterval)
		ra := nodes[0].sh.Tick(now)
		nodes[1].sh.Observe(ra, now.Add(5*time.Millisecond))
		rb := nodes[1].sh.Tick(now.Add(50 * time.Millisecond))
		nodes[0].sh.Observe(rb, now.Add(55*time.Millisecond))
	}
	check("idle")
	for _, n := range nodes {
		if st := n.sh.Stats(sharingAt(time.Hour)); st.Tracked != 0 {
			t.Fatalf("%s: %d keys still tracked after 30 idle intervals", n.name, st.Tracked)
		}
	}
}

// The partition policy applies to the cold share through Tick: a node of
// 3 that hears from neither peer for longer than the TTL (3 intervals +
// 500ms) gives untracked keys 1 under FailOpen, 0 under FailClosed, and
// the usual 1.1/3 under LocalShare.
func TestSharingPartitionPolicies(t *testing.T) {
	const ttl = 3*sharingInterval + 500*time.Millisecond
	cold := 1.1 / 3
	for _, tc := range []struct {
		name            string
		policy          PartitionPolicy
		forming, silent float64
	}{
		// Alone at a start: FailOpen lifts the limit (no majority seen);
		// FailClosed denies only once known nodes went silent.
		{"local_share", LocalShare, cold, cold},
		{"fail_open", FailOpen, 1, 1},
		{"fail_closed", FailClosed, cold, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newSharingNode(t, SharingConfig{Self: "a", OnPartition: tc.policy}, 3, limiter.SlidingWindow)
			coldNow := func(step string, now time.Time, want float64, minority bool, live int) {
				t.Helper()
				share, tracked := n.sh.Share(sharingRuleID, "k", sharingLimit)
				st := n.sh.Stats(now)
				if tracked || !sharingNear(share, want) || !sharingNear(st.ColdShare, want) || st.Minority != minority || st.Live != live {
					t.Fatalf("%s: Share %v (tracked %v), %+v; want %v, minority %v, live %d", step, share, tracked, st, want, minority, live)
				}
			}
			n.sh.Tick(sharingT0)
			coldNow("forming", sharingT0, tc.forming, true, 1)

			seen := sharingAt(10 * time.Millisecond)
			n.sh.Observe(Report{Node: "b", Seq: 1, IntervalMillis: 100}, seen)
			n.sh.Observe(Report{Node: "c", Seq: 1, IntervalMillis: 100}, seen)
			n.sh.Tick(sharingAt(sharingInterval))
			coldNow("all seen", sharingAt(sharingInterval), cold, false, 3)

			// At exactly the TTL the peers still count.
			n.sh.Tick(seen.Add(ttl))
			coldNow("at the TTL", seen.Add(ttl), cold, false, 3)

			after := seen.Add(ttl + time.Millisecond)
			n.sh.Tick(after)
			coldNow("peers silent", after, tc.silent, true, 1)

			// One peer back: a majority again.
			back := after.Add(time.Millisecond)
			n.sh.Observe(Report{Node: "b", Seq: 2, IntervalMillis: 100}, back)
			n.sh.Tick(back)
			coldNow("b back", back, cold, false, 2)
		})
	}
}

// A tracked key that is not hot gets the cold share in force, the
// partition policy applied, as untracked keys do: under FailClosed a
// minority node denies it, under FailOpen it lifts its limit.
func TestSharingTrackedColdKeyFollowsPartitionPolicy(t *testing.T) {
	const ttl = 3*sharingInterval + 500*time.Millisecond
	for _, tc := range []struct {
		name   string
		policy PartitionPolicy
		want   float64
	}{
		{"fail_closed", FailClosed, 0},
		{"fail_open", FailOpen, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newSharingNode(t, SharingConfig{Self: "a", OnPartition: tc.policy}, 3, limiter.SlidingWindow)
			n.sh.Observe(Report{Node: "b", Seq: 1, IntervalMillis: 100}, sharingT0)
			n.sh.Observe(Report{Node: "c", Seq: 1, IntervalMillis: 100}, sharingT0)
			n.sh.Tick(sharingT0)
			// A key tracked, asked a little (not reported).
			n.sh.Track(sharingRuleID, "small", sharingLimit)
			for i := 1; ; i++ {
				now := sharingT0.Add(time.Duration(i) * sharingInterval)
				n.ask("small", 3, now.Add(-time.Millisecond))
				n.sh.Tick(now)
				if now.Sub(sharingT0) > ttl {
					break
				}
			}
			now := sharingT0.Add(ttl + 2*sharingInterval)
			n.ask("small", 3, now.Add(-time.Millisecond))
			n.sh.Tick(now)
			if !n.sh.Stats(now).Minority {
				t.Fatal("not a minority")
			}
			untracked, _ := n.sh.Share(sharingRuleID, "other", sharingLimit)
			share, tracked := n.sh.Share(sharingRuleID, "small", sharingLimit)
			if !tracked {
				t.Fatal("small not tracked")
			}
			if untracked != tc.want || share != tc.want {
				t.Fatalf("untracked key %v, tracked cold key %v; want both %v", untracked, share, tc.want)
			}
		})
	}
}
