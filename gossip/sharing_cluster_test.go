package gossip

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/edgebyte/edgelimit/limiter"
)

// The tests of this file run quota sharing end to end in real time: each
// node is a real Cluster (memberlist on 127.0.0.1) and a Sharing in front
// of a real limiter.Limiter, wired the way the Caddy module wires them
// (caddymodule/cluster.go and serve.go). Real time cannot be avoided with
// real memberlist, so the tests never assert on a sleep: they poll for a
// state (shares, the cold share, Stats) with a deadline.

const (
	clusterSync     = 50 * time.Millisecond // the sync interval of these tests
	clusterDeadline = 5 * time.Second       // how long a condition may take
	clusterRate     = 3000                  // requests per second of a busy node: 3×L
)

// clusterTTL is how long the reports of a silent node count (ShareTable's
// default TTL at clusterSync).
const clusterTTL = 3*clusterSync + 500*time.Millisecond

// sharedNode is one node of a test cluster: membership, quota sharing and
// a limiter enforcing sharingLimit per second (burst 100) times the share,
// with a sync loop every clusterSync.
type sharedNode struct {
	name string
	c    *Cluster
	ft   *FaultTransport
	sh   *Sharing
	lim  *limiter.Limiter

	stopSync chan struct{}
	syncDone chan struct{}
	stopOnce sync.Once

	mu      sync.Mutex
	drivers []func()             // stops the traffic generators running on this node
	blocks  map[string]time.Time // blocks learnt (OnBlock), by key; under mu
}

// startSharedNode starts a node named name with the partition policy
// policy, joining seeds. It is stopped (traffic, sync loop, membership)
// when the test ends.
func startSharedNode(t *testing.T, name string, policy PartitionPolicy, seeds ...string) *sharedNode {
	t.Helper()
	lim, err := limiter.New(limiter.Config{
		Algorithm: limiter.TokenBucket,
		Limits:    []limiter.Limit{{Count: sharingLimit, Window: time.Second}},
		Burst:     100,
		Shares:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &sharedNode{
		name: name, lim: lim,
		stopSync: make(chan struct{}), syncDone: make(chan struct{}),
		blocks: map[string]time.Time{},
	}
	n.sh = NewSharing(SharingConfig{Self: name, Interval: clusterSync, OnPartition: policy,
		OnBlock: func(rule uint64, key string, until time.Time, offences int) {
			n.mu.Lock()
			if rule == sharingRuleID && until.After(n.blocks[key]) {
				n.blocks[key] = until
			}
			n.mu.Unlock()
		}})
	n.sh.SetRules([]Rule{{Name: sharingRuleName, Window: time.Second, Demand: func(key string) uint64 {
		d, _ := n.lim.TakeDemand(key)
		return d
	}}})
	c, err := New(Config{
		NodeName:     name,
		Bind:         "127.0.0.1:0",
		Join:         seeds,
		SyncInterval: clusterSync,
		Rejoin:       200 * time.Millisecond,
		Tune:         fastTune,
		WrapTransport: func(tr memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			n.ft = NewFaultTransport(tr)
			return n.ft
		},
	}, func(r Report) { n.sh.Observe(r, time.Now()) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	go n.syncLoop()
	t.Cleanup(func() {
		n.stop()
		_ = n.c.kill() // no leave: the whole cluster stops at once
	})
	return n
}

// syncLoop is the product's sync loop (caddymodule clusterNode.sync).
func (n *sharedNode) syncLoop() {
	defer close(n.syncDone)
	tk := time.NewTicker(clusterSync)
	defer tk.Stop()
	for {
		select {
		case <-n.stopSync:
			return
		case now := <-tk.C:
			size := 0
			for _, m := range n.c.Members() {
				if m.State != StateLeft {
					size++
				}
			}
			n.sh.SetClusterSize(size)
			r := n.sh.Tick(now)
			_ = n.c.Broadcast(&r) // errors expected while partitioned
		}
	}
}

// stop stops the node's traffic and its sync loop.
func (n *sharedNode) stop() {
	n.stopOnce.Do(func() {
		n.mu.Lock()
		drivers := n.drivers
		n.drivers = nil
		n.mu.Unlock()
		for _, d := range drivers {
			d()
		}
		close(n.stopSync)
		<-n.syncDone
	})
}

// crash stops the node the way a crash would: no more traffic or
// reports, and no leave message.
func (n *sharedNode) crash(t *testing.T) {
	t.Helper()
	n.stop()
	if err := n.c.kill(); err != nil {
		t.Fatal(err)
	}
}

// request decides one request for key through the product's request path
// (caddymodule rule.decide): the share, the limiter scaled by it, and
// Track when a decision on a key not tracked left less than half of it.
func (n *sharedNode) request(key string) {
	share, tracked := n.sh.Share(sharingRuleID, key, sharingLimit)
	d := n.lim.AllowScaledAt(key, time.Now(), 1, share)
	if q := d.Quotas[0]; !tracked && 2*q.Remaining <= q.Limit {
		n.sh.Track(sharingRuleID, key, sharingLimit)
	}
}

// drive sends rate requests per second for key on n, paced by the clock
// (a late tick catches up, so the average rate holds), until the returned
// function is called (or the node stops).
func (n *sharedNode) drive(key string, rate int) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		start, sent := time.Now(), 0
		for {
			select {
			case <-done:
				return
			case now := <-tk.C:
				for want := int(now.Sub(start).Seconds() * float64(rate)); sent < want; sent++ {
					n.request(key)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-exited }) }
	n.mu.Lock()
	n.drivers = append(n.drivers, stop)
	n.mu.Unlock()
	return stop
}

// share is key's share in force on n, and the key string n knows it by
// ("" if n follows it without having seen it); the cold share if n does
// not track it. It has no side effect (Share would make n adopt the key).
func (n *sharedNode) share(key string) (share float64, seen string, tracked bool) {
	if ks, ok := sharingFind(n.sh, sharingRuleID, key); ok {
		return ks.Share, ks.Key, true
	}
	return n.sh.Stats(time.Now()).ColdShare, "", false
}

// coldShare is the share a key never seen gets on n, asked the way the
// request path asks.
func (n *sharedNode) coldShare(t *testing.T) float64 {
	t.Helper()
	share, tracked := n.sh.Share(sharingRuleID, "never-seen-key", sharingLimit)
	if tracked {
		t.Fatalf("%s tracks a key nobody asked for", n.name)
	}
	return share
}

// startSharedCluster starts size nodes with the partition policy policy
// and waits until every node sees every other one alive in the membership
// and live in its share table (it has their reports).
func startSharedCluster(t *testing.T, size int, policy PartitionPolicy) []*sharedNode {
	t.Helper()
	nodes := []*sharedNode{startSharedNode(t, "n0", policy)}
	for i := 1; i < size; i++ {
		nodes = append(nodes, startSharedNode(t, fmt.Sprintf("n%d", i), policy, nodes[0].c.Addr()))
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	all := strings.Join(names, ",")
	waitFor(t, 10*time.Second, "membership to converge", func() bool {
		for _, n := range nodes {
			if aliveNames(n.c) != all {
				return false
			}
		}
		return true
	})
	cold := 1.1 / float64(size)
	waitFor(t, clusterDeadline, "every node to hear from every other one", func() bool {
		for _, n := range nodes {
			st := n.sh.Stats(time.Now())
			if st.Live != size || st.Minority || !near(st.ColdShare, cold) {
				return false
			}
		}
		return true
	})
	return nodes
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }

// logShares logs key's share on every node, for a failing test.
func logShares(t *testing.T, nodes []*sharedNode, key string) {
	t.Helper()
	for _, n := range nodes {
		share, seen, tracked := n.share(key)
		t.Logf("%s: share %.4f (tracked %v, key %q), stats %+v", n.name, share, tracked, seen, n.sh.Stats(time.Now()))
	}
}

// pollShares waits for cond like waitFor, and logs key's shares on every
// node if it times out.
func pollShares(t *testing.T, d time.Duration, nodes []*sharedNode, key, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			logShares(t, nodes, key)
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkClusterStats checks that the nodes exchanged reports and that no
// message was dropped (undecodable or overflowing the callbacks' queue).
func checkClusterStats(t *testing.T, nodes []*sharedNode) {
	t.Helper()
	for _, n := range nodes {
		st := n.c.Stats()
		if st.MessagesSent == 0 || st.ReportsReceived == 0 {
			t.Errorf("%s exchanged no reports: %+v", n.name, st)
		}
		for reason, v := range st.Dropped {
			// a member under load may give up on a stream before its
			// first byte (memberlist's TCP ping past its deadline):
			// counted as empty, not a message lost
			if v != 0 && reason != "empty" {
				t.Errorf("%s dropped %d messages as %s", n.name, v, reason)
			}
		}
	}
}

// A key hot on one node gets all of the limit there but the other nodes'
// floors (DefaultFloor split between the 3 nodes); the others follow it
// without having seen it, at the floor. When the traffic moves to another
// node, the share follows it.
func TestSharingClusterHotKey(t *testing.T) {
	nodes := startSharedCluster(t, 3, LocalShare)
	const key = "10.0.0.7"
	busy, floor := 1-DefaultFloor*2/3, DefaultFloor/3 // 0.9867, 0.0067

	// hotOn waits until key is hot on nodes[i] alone: a share above 0.9
	// there, and below 0.05 on the others, which follow it (without its
	// string if they never saw it); then until the shares settle at
	// exactly busy and the floor.
	hotOn := func(i int, saw map[int]bool) {
		t.Helper()
		start := time.Now()
		shares := func(exact bool) func() bool {
			return func() bool {
				for j, n := range nodes {
					share, seen, tracked := n.share(key)
					switch {
					case !tracked:
						return false
					case j == i:
						if seen != key || share <= 0.9 || exact && math.Abs(share-busy) > 1e-6 {
							return false
						}
					case share >= 0.05 || exact && math.Abs(share-floor) > 1e-6:
						return false
					case !saw[j] && seen != "":
						t.Fatalf("%s knows the key string %q without having seen it", n.name, seen)
					}
				}
				return true
			}
		}
		what := fmt.Sprintf("%s to get the key and the others the floor", nodes[i].name)
		pollShares(t, clusterDeadline, nodes, key, what, shares(false))
		t.Logf("%s took the key in %v", nodes[i].name, time.Since(start).Round(time.Millisecond))
		pollShares(t, clusterDeadline, nodes, key, what+" exactly", shares(true))
	}

	stop := nodes[0].drive(key, clusterRate)
	hotOn(0, nil)
	if st := nodes[1].sh.Stats(time.Now()); st.Tracked != 1 || st.Live != 3 || st.Minority {
		t.Errorf("n1's stats: %+v", st)
	}

	stop()
	nodes[1].drive(key, clusterRate)
	// n0 may keep the key string or forget the key in between (when its
	// demand stops before n1's report of the key arrives), then follow it
	// again without the string: either is right.
	hotOn(1, map[int]bool{0: true})
	checkClusterStats(t, nodes)
}

// A partition of 5 nodes into {n0,n1} | {n2,n3,n4}: the minority applies
// on_partition to the keys it does not track (the cold share), the
// majority keeps (1+10%)/5; once healed, every node is back to 1.1/5.
func TestSharingClusterPartition(t *testing.T) {
	const size = 5
	cold := 1.1 / size
	for _, tc := range []struct {
		policy PartitionPolicy
		name   string
		cold   float64 // the minority's cold share
	}{
		{FailClosed, "fail_closed", 0},
		{FailOpen, "fail_open", 1},
		{LocalShare, "local_share", cold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startSharedCluster(t, size, tc.policy)
			minority, majority := nodes[:2], nodes[2:]
			// The majority's cold share never moves, whatever the phase.
			checkMajority := func() {
				t.Helper()
				for _, n := range majority {
					if got := n.coldShare(t); !near(got, cold) {
						t.Fatalf("%s (majority): cold share %v, want %v; stats %+v", n.name, got, cold, n.sh.Stats(time.Now()))
					}
					if st := n.sh.Stats(time.Now()); st.Minority {
						t.Fatalf("%s (majority) sees a minority: %+v", n.name, st)
					}
				}
			}

			var fa, fb []*FaultTransport
			var aa, ab []string
			for _, n := range minority {
				fa, aa = append(fa, n.ft), append(aa, n.c.Addr())
			}
			for _, n := range majority {
				fb, ab = append(fb, n.ft), append(ab, n.c.Addr())
			}
			start := time.Now()
			Partition(fa, aa, fb, ab)
			waitFor(t, clusterDeadline, "the minority to apply "+tc.name, func() bool {
				checkMajority()
				for _, n := range minority {
					st := n.sh.Stats(time.Now())
					if !st.Minority || st.Live != 2 || !near(n.coldShare(t), tc.cold) {
						return false
					}
				}
				return true
			})
			t.Logf("partition applied in %v", time.Since(start).Round(time.Millisecond))
			// It lasts: the minority stays there while the majority keeps
			// its shares (memberlist declares the other side dead
			// meanwhile, and the cluster size still counts it).
			waitFor(t, clusterDeadline, "each side to see the other dead", func() bool {
				checkMajority()
				for _, n := range minority {
					if st := n.sh.Stats(time.Now()); !st.Minority || !near(n.coldShare(t), tc.cold) {
						t.Fatalf("%s left the minority while partitioned: %+v", n.name, st)
					}
				}
				return stateOf(nodes[0].c, "n4") == StateDead && stateOf(nodes[4].c, "n0") == StateDead
			})

			start = time.Now()
			for _, n := range nodes {
				n.ft.Heal()
			}
			waitFor(t, clusterDeadline, "every node back to the cold share of 5", func() bool {
				checkMajority()
				for _, n := range minority {
					if st := n.sh.Stats(time.Now()); st.Minority || !near(n.coldShare(t), cold) {
						return false
					}
				}
				return true
			})
			t.Logf("healed in %v", time.Since(start).Round(time.Millisecond))
			checkClusterStats(t, nodes)
		})
	}
}

// A key split between two nodes at equal demand gives each about half of
// the limit; when one of them crashes (no leave message), the other takes
// all of it but the floors once the crashed node's last report expires
// (TTL: 3 intervals + 500ms).
func TestSharingClusterKilledNode(t *testing.T) {
	nodes := startSharedCluster(t, 3, LocalShare)
	const key = "user-42"
	nodes[0].drive(key, clusterRate)
	nodes[1].drive(key, clusterRate)
	pollShares(t, clusterDeadline, nodes, key, "n0 and n1 to split the key", func() bool {
		for _, n := range nodes[:2] {
			if share, seen, _ := n.share(key); seen != key || share < 0.4 || share > 0.6 {
				return false
			}
		}
		share, _, tracked := nodes[2].share(key)
		return tracked && share < 0.05
	})
	for _, n := range nodes {
		share, _, _ := n.share(key)
		t.Logf("%s: share %.4f", n.name, share)
	}

	killed := time.Now()
	nodes[1].crash(t)
	margin := time.Second // scheduling, -race, the raise delay
	pollShares(t, clusterTTL+margin, nodes, key, "n0 to take the key", func() bool {
		share, _, _ := nodes[0].share(key)
		return share > 0.9
	})
	t.Logf("n0 took the key %v after n1 crashed (TTL %v)", time.Since(killed).Round(time.Millisecond), clusterTTL)
	if share, _, _ := nodes[2].share(key); share >= 0.05 {
		logShares(t, nodes, key)
		t.Fatalf("n2's share rose to %v", share)
	}
	if st := nodes[0].sh.Stats(time.Now()); st.Live != 2 || st.Minority {
		t.Errorf("n0's stats after the crash: %+v", st)
	}
}

// Every packet sent again 1 s later (a replay of captured traffic, which
// memberlist's encryption does not stop): the replayed reports are older
// than the ones their senders sent since, and are ignored; the shares are
// those of a clean network, and follow the traffic when it moves.
func TestSharingClusterReplay(t *testing.T) {
	nodes := startSharedCluster(t, 3, LocalShare)
	for _, n := range nodes {
		n.ft.SetReplay(time.Second)
	}
	const key = "10.0.0.8"
	hot := func(i int) {
		t.Helper()
		pollShares(t, clusterDeadline, nodes, key, fmt.Sprintf("%s to get the key despite the replays", nodes[i].name), func() bool {
			for j, n := range nodes {
				share, _, tracked := n.share(key)
				if !tracked || j == i && share <= 0.9 || j != i && share >= 0.05 {
					return false
				}
			}
			return true
		})
	}
	stop := nodes[0].drive(key, clusterRate)
	hot(0)
	stop()
	nodes[1].drive(key, clusterRate)
	hot(1)
	// a second after the move, n0's replayed reports of the key (n0 hot)
	// keep arriving: n1 keeps the key all that time
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if share, _, _ := nodes[1].share(key); share <= 0.9 {
			t.Fatalf("a replayed report cut n1's share to %v", share)
		}
	}
	checkClusterStats(t, nodes)
}

// learnt is the end of the block of key that n learnt from the others
// (zero if none).
func (n *sharedNode) learnt(key string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.blocks[key]
}

// A block published on one node reaches the others with its next report,
// and a node that starts after it learns it from the reports that repeat
// it while it runs.
func TestSharingClusterBlocks(t *testing.T) {
	nodes := startSharedCluster(t, 3, LocalShare)
	until := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	start := time.Now()
	nodes[0].sh.PublishBlock(sharingRuleID, "203.0.113.9", until, 2)
	waitFor(t, clusterDeadline, "the block to reach n1 and n2", func() bool {
		return nodes[1].learnt("203.0.113.9").Equal(until) && nodes[2].learnt("203.0.113.9").Equal(until)
	})
	// one sync interval until the next report, and the network: on a
	// loaded machine allow ten
	took := time.Since(start)
	if took > 10*clusterSync {
		t.Errorf("the block took %v to reach every node (sync interval %v)", took, clusterSync)
	}
	if got := nodes[0].learnt("203.0.113.9"); !got.IsZero() {
		t.Errorf("n0 learnt its own block: %v", got)
	}
	late := startSharedNode(t, "n3", LocalShare, nodes[0].c.Addr())
	joined := time.Now()
	waitFor(t, clusterDeadline, "the late node to learn the block", func() bool {
		return late.learnt("203.0.113.9").Equal(until)
	})
	t.Logf("a block reached the running nodes in %v, a node started after it in %v", took, time.Since(joined))
	if st := nodes[1].sh.Stats(time.Now()); st.BlocksReceived == 0 || st.UnknownRules != 0 {
		t.Errorf("n1 stats %+v", st)
	}
}
