package gossip

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	testKey  = []byte("0123456789abcdef")
	otherKey = []byte("fedcba9876543210")
)

// fastTune makes failure detection and gossip quick on loopback.
func fastTune(mc *memberlist.Config) {
	mc.ProbeInterval = 100 * time.Millisecond
	mc.ProbeTimeout = 50 * time.Millisecond
	mc.GossipInterval = 20 * time.Millisecond
	mc.SuspicionMult = 2
	mc.SuspicionMaxTimeoutMult = 2
	mc.PushPullInterval = 500 * time.Millisecond
	mc.TCPTimeout = 500 * time.Millisecond
	mc.GossipToTheDeadTime = time.Second
	mc.IndirectChecks = 1
	mc.RetransmitMult = 2
}

type testNode struct {
	c  *Cluster
	ft *FaultTransport

	mu      sync.Mutex
	got     map[string]int    // entries received, by sender
	bad     []string          // entries that did not match what was sent
	resets  []Reset           // resets received
	lastSeq map[string]uint64 // highest seq received, by sender
}

func startNode(t *testing.T, name string, key []byte, seeds ...string) *testNode {
	t.Helper()
	n := &testNode{got: map[string]int{}, lastSeq: map[string]uint64{}}
	cfg := Config{
		NodeName: name,
		Bind:     "127.0.0.1:0",
		Join:     seeds,
		Rejoin:   200 * time.Millisecond,
		Tune:     fastTune,
		WrapTransport: func(tr memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			n.ft = NewFaultTransport(tr)
			return n.ft
		},
	}
	if key != nil {
		cfg.SecretKeys = [][]byte{key}
	}
	c, err := New(cfg, n.onReport, func(rule, key string) {
		n.mu.Lock()
		n.resets = append(n.resets, Reset{rule, key})
		n.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	t.Cleanup(func() { _ = c.Close() })
	return n
}

// testEntries is what node sends with sequence number seq: entry i has
// Key i, so a receiver can check every part on its own.
func testEntries(node string, seq uint64, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Rule: KeyHash(node), Key: uint64(i), Limit: 100, Demand: uint32(seq), Admitted: uint32(seq) + uint32(i)}
	}
	return es
}

func (n *testNode) onReport(r Report) {
	n.mu.Lock()
	defer n.mu.Unlock()
	want := testEntries(r.Node, r.Seq, 200)
	for _, e := range r.Entries {
		if e.Key >= 200 || e != want[e.Key] || r.IntervalMillis != 50 {
			n.bad = append(n.bad, fmt.Sprintf("%s seq %d: %+v", r.Node, r.Seq, e))
		}
	}
	n.got[r.Node] += len(r.Entries)
	n.lastSeq[r.Node] = max(n.lastSeq[r.Node], r.Seq)
}

func (n *testNode) received(from string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.got[from]
}

// broadcastLoop makes every node broadcast a 200-entry report (several
// packets) every 50 ms until the test ends.
func broadcastLoop(t *testing.T, nodes []*testNode) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			tk := time.NewTicker(50 * time.Millisecond)
			defer tk.Stop()
			for seq := uint64(1); ; seq++ {
				r := Report{Node: n.c.Name(), Seq: seq, IntervalMillis: 50, Entries: testEntries(n.c.Name(), seq, 200)}
				_ = n.c.Broadcast(&r) // errors expected while partitioned
				select {
				case <-stop:
					return
				case <-tk.C:
				}
			}
		})
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// waitFor polls cond until it holds, failing t after 3×d: the wait ends
// as soon as cond holds, and a gossip exchange on two cores busy with the
// other packages' tests under -race can take several times its quiet
// duration (a CI run once timed out here). No caller asserts a bound on
// the time itself.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", 3*d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func aliveNames(c *Cluster) string {
	var names []string
	for _, m := range c.Members() {
		if m.State == StateAlive {
			names = append(names, m.Name)
		}
	}
	return strings.Join(names, ",")
}

func stateOf(c *Cluster, name string) string {
	for _, m := range c.Members() {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

func startCluster(t *testing.T, n int) []*testNode {
	t.Helper()
	nodes := []*testNode{startNode(t, "n0", testKey)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(t, fmt.Sprintf("n%d", i), testKey, nodes[0].c.Addr()))
	}
	var all []string
	for _, nd := range nodes {
		all = append(all, nd.c.Name())
	}
	want := strings.Join(all, ",")
	waitFor(t, 10*time.Second, "membership to converge", func() bool {
		for _, nd := range nodes {
			if aliveNames(nd.c) != want {
				return false
			}
		}
		return true
	})
	return nodes
}

func TestClusterReportsAndResets(t *testing.T) {
	nodes := startCluster(t, 4)
	broadcastLoop(t, nodes)
	waitFor(t, 10*time.Second, "reports from every node at every node", func() bool {
		for _, to := range nodes {
			for _, from := range nodes {
				if from != to && to.received(from.c.Name()) < 600 {
					return false
				}
			}
		}
		return true
	})
	for _, n := range nodes {
		n.mu.Lock()
		if len(n.bad) > 0 {
			t.Errorf("%s got wrong entries: %v", n.c.Name(), n.bad[:min(3, len(n.bad))])
		}
		if n.got[n.c.Name()] != 0 {
			t.Errorf("%s received its own reports", n.c.Name())
		}
		n.mu.Unlock()
		if max := n.ft.MaxPacket(); max > 1400 {
			t.Errorf("%s sent a %d-byte packet, over the 1400-byte budget", n.c.Name(), max)
		}
		s := n.c.Stats()
		if s.MessagesSent == 0 || s.ReportsReceived == 0 || s.BytesReceived == 0 {
			t.Errorf("%s stats: %+v", n.c.Name(), s)
		}
		for r, v := range s.Dropped {
			if v != 0 && r != "empty" { // see checkClusterStats
				t.Errorf("%s dropped %d as %s", n.c.Name(), v, r)
			}
		}
	}
	if parts := SplitReport(&Report{Node: "n0", Entries: make([]Entry, 200)}, nodes[0].c.MaxMessageBytes()); len(parts) < 2 {
		t.Fatalf("test reports fit in %d packet: the split path is not exercised", len(parts))
	}

	sent := nodes[1].c.Stats().MessagesSent
	if err := nodes[1].c.BroadcastReset(strings.Repeat("r", MaxRuleBytes+1), "k"); err == nil {
		t.Fatal("a reset with a 256-byte rule name was accepted")
	}
	if err := nodes[1].c.BroadcastReset("api", strings.Repeat("k", MaxKeyBytes+1)); err == nil {
		t.Fatal("a reset with a 4097-byte key was accepted")
	}
	if got := nodes[1].c.Stats().MessagesSent; got != sent {
		t.Fatalf("refused resets sent %d messages", got-sent)
	}
	resets := []Reset{
		{Rule: "api", Key: "10.0.0.1"},
		{Rule: strings.Repeat("r", MaxRuleBytes), Key: strings.Repeat("k", MaxKeyBytes)}, // larger than a UDP packet
	}
	for _, r := range resets {
		if err := nodes[1].c.BroadcastReset(r.Rule, r.Key); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "the resets at every other node", func() bool {
		for i, n := range nodes {
			n.mu.Lock()
			got := append([]Reset(nil), n.resets...)
			n.mu.Unlock()
			if i == 1 && len(got) != 0 {
				t.Fatal("the sender got its own reset")
			}
			if i != 1 && (len(got) != len(resets) || !slices.Contains(got, resets[0]) || !slices.Contains(got, resets[1])) {
				return false // two TCP streams: either may be handled first
			}
		}
		return true
	})

	// Hostile bytes from a member are counted and dropped.
	to := nodes[0].c.others()[0]
	var target *testNode
	for _, n := range nodes {
		if n.c.Name() == to.Name {
			target = n
		}
	}
	for _, b := range [][]byte{{9, 1}, {1, 9}, {1, 1, 5}, append(resetMsg(t, Reset{}), 0), {1, 2, 0x01, 0x00}} {
		if err := nodes[0].c.ml.SendBestEffort(to, b); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "hostile messages to be dropped", func() bool {
		d := target.c.Stats().Dropped
		return d["version"] == 1 && d["type"] == 1 && d["truncated"] == 1 && d["trailing"] == 1 && d["too_large"] == 1
	})
}

func TestWrongKeyCannotJoin(t *testing.T) {
	nodes := startCluster(t, 2)
	intruder := startNode(t, "intruder", otherKey, nodes[0].c.Addr())
	if n, err := intruder.c.Join(nodes[0].c.Addr()); err == nil || n != 0 {
		t.Fatalf("join with the wrong key: %d, %v", n, err)
	}
	waitFor(t, 5*time.Second, "background join attempts to fail", func() bool {
		return intruder.c.Stats().JoinFailures >= 3
	})
	for _, n := range nodes {
		if s := stateOf(n.c, "intruder"); s != "" {
			t.Errorf("%s sees the intruder as %q", n.c.Name(), s)
		}
	}
	if got := aliveNames(intruder.c); got != "intruder" {
		t.Errorf("intruder sees %s", got)
	}
}

func TestNewRefusals(t *testing.T) {
	if _, err := New(Config{Bind: "0.0.0.0:0"}, nil, nil); err == nil || !strings.Contains(err.Error(), "secret key") {
		t.Errorf("no key off loopback: %v", err)
	}
	if _, err := New(Config{Bind: "127.0.0.1:0", SecretKeys: [][]byte{[]byte("short")}}, nil, nil); err == nil {
		t.Error("a 5-byte key was accepted")
	}
	if _, err := New(Config{Bind: "127.0.0.1:0", NodeName: strings.Repeat("x", 256)}, nil, nil); err == nil {
		t.Error("a 256-byte node name was accepted")
	}
	c, err := New(Config{Bind: "127.0.0.1:0"}, nil, nil)
	if err != nil {
		t.Fatalf("no key on loopback: %v", err)
	}
	if !strings.Contains(c.Name(), ":") {
		t.Errorf("default name %q", c.Name())
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestPartitionHeals(t *testing.T) {
	nodes := startCluster(t, 4)
	broadcastLoop(t, nodes)
	a, b := nodes[:2], nodes[2:]
	cross := func() (n int) {
		for _, x := range a {
			for _, y := range b {
				n += x.received(y.c.Name()) + y.received(x.c.Name())
			}
		}
		return n
	}
	// same returns, for each node, the entries it got from its partner
	// on its side of the partition.
	partner := map[string]string{"n0": "n1", "n1": "n0", "n2": "n3", "n3": "n2"}
	same := func() []int {
		var out []int
		for _, n := range nodes {
			out = append(out, n.received(partner[n.c.Name()]))
		}
		return out
	}
	grew := func(from []int, by int) func() bool {
		return func() bool {
			for i, v := range same() {
				if v < from[i]+by {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "reports to cross", func() bool { return cross() > 0 })

	var addrA, addrB []string
	var ftA, ftB []*FaultTransport
	for _, n := range a {
		addrA, ftA = append(addrA, n.c.Addr()), append(ftA, n.ft)
	}
	for _, n := range b {
		addrB, ftB = append(addrB, n.c.Addr()), append(ftB, n.ft)
	}
	Partition(ftA, addrA, ftB, addrB)
	// Once every node has had two reports sent after the cut by its
	// partner, the reports sent before it have landed too.
	waitFor(t, 5*time.Second, "reports within each side", grew(same(), 2*200))
	c0 := cross()
	waitFor(t, 5*time.Second, "more reports within each side", grew(same(), 5*200))
	if c := cross(); c != c0 {
		for _, x := range nodes {
			x.mu.Lock()
			t.Logf("%s got %v (dropped %d)", x.c.Name(), x.got, x.ft.Dropped())
			x.mu.Unlock()
		}
		t.Fatalf("%d entries crossed the partition", c-c0)
	}
	waitFor(t, 10*time.Second, "each side to see the other dead", func() bool {
		return stateOf(nodes[0].c, "n3") == StateDead && stateOf(nodes[3].c, "n0") == StateDead
	})

	for _, n := range nodes {
		n.ft.Heal()
	}
	waitFor(t, 15*time.Second, "the sides to merge", func() bool {
		for _, n := range nodes {
			if aliveNames(n.c) != "n0,n1,n2,n3" {
				return false
			}
		}
		return true
	})
	c1 := cross()
	waitFor(t, 5*time.Second, "reports to cross again", func() bool { return cross() > c1 })
}

func TestCloseLeaves(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[2].c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the others to see n2 leave", func() bool {
		return stateOf(nodes[0].c, "n2") == StateLeft && stateOf(nodes[1].c, "n2") == StateLeft
	})
	if got := aliveNames(nodes[0].c); got != "n0,n1" {
		t.Errorf("alive after leave: %s", got)
	}
}

func TestKilledNodeDies(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[2].c.kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the others to see n2 dead", func() bool {
		return stateOf(nodes[0].c, "n2") == StateDead && stateOf(nodes[1].c, "n2") == StateDead
	})
}
