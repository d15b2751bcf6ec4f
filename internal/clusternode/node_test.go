package clusternode

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/edgebyte/edgelimit/gossip"
)

// testSettings are a loopback node's settings (no key needed there),
// its Print telling the policy apart.
func testSettings(name string, policy gossip.PartitionPolicy) Settings {
	return Settings{
		Gossip:     gossip.Config{Bind: "127.0.0.1:0", NodeName: name, SyncInterval: gossip.DefaultSyncInterval},
		Policy:     policy,
		PolicyText: fmt.Sprint(policy),
		Print:      fmt.Sprint(name, policy),
	}
}

// A reload with the same cluster block keeps the node (no rebind, no
// rejoin); a changed block replaces it; the last release stops it.
func TestClusterPool(t *testing.T) {
	s := testSettings("pool-test", gossip.LocalShare)
	if Existing(s) != nil {
		t.Fatal("a node before any start")
	}
	first, err := Acquire(s, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if again := Existing(s); again != first {
		t.Fatalf("same settings: node %p, want the running %p", again, first)
	}
	Release(first)            // the reload's old config goes
	if Existing(s) != first { // the next reload's new config
		t.Fatal("node stopped while still in use")
	}
	Release(first)
	Release(first)

	changed := testSettings("pool-test", gossip.FailClosed)
	one, err := Acquire(s, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if Existing(changed) != nil {
		t.Fatal("a changed block reuses the node")
	}
	two, err := Acquire(changed, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if two == one || Existing(s) != nil {
		t.Fatal("a changed block kept the old node")
	}
	Release(one) // the old config stops: the new node stays
	if Existing(changed) != two {
		t.Fatal("the old config's release stopped the new node")
	}
	Release(two)
	Release(two)
	if refs, ok := nodes.References(s.Gossip.Bind); ok {
		t.Fatalf("the address is still in use: %d references", refs)
	}
}

// The cluster size counts members alive, and dead ones for deadMemory,
// never those that left.
func TestClusterSize(t *testing.T) {
	now := time.Unix(10_000, 0)
	members := []gossip.Member{
		{Name: "self", State: gossip.StateAlive, Self: true},
		{Name: "b", State: gossip.StateAlive},
		{Name: "crashed", State: gossip.StateDead, Since: now.Add(-time.Minute)},
		{Name: "crashed-long-ago", State: gossip.StateDead, Since: now.Add(-deadMemory)},
		{Name: "left", State: gossip.StateLeft, Since: now.Add(-time.Second)},
	}
	if got := Size(members, now); got != 3 {
		t.Errorf("cluster size %d, want 3 (self, b, crashed)", got)
	}
}

func TestExpectedSize(t *testing.T) {
	for _, c := range []struct {
		join []string
		want int
	}{
		{nil, 1},
		{[]string{"10.0.0.5:7946", "10.0.0.6:7946", "10.0.0.7:7946"}, 3}, // the same list on every node
		{[]string{"10.0.0.6:7946", "10.0.0.7:7946"}, 3},                  // the others only
		{[]string{"10.0.0.6:7946", "10.0.0.6:7946"}, 2},                  // a seed twice
	} {
		if got := expectedSize(c.join, "10.0.0.5:7946", "0.0.0.0:7946"); got != c.want {
			t.Errorf("join %v: %d, want %d", c.join, got, c.want)
		}
	}
}

func TestMemberlistLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	w := memberlistLog{zap.New(core)}
	for _, line := range []string{
		"[DEBUG] memberlist: Stream connection from=127.0.0.1:40816\n",
		"[WARN] memberlist: Was able to connect to b over TCP but UDP probes failed\n",
		"[ERR] memberlist: Failed to send ping\n",
		"no level\n",
	} {
		w.Write([]byte(line))
	}
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	want := "[debug Stream connection from=127.0.0.1:40816 warn Was able to connect to b over TCP but UDP probes failed error Failed to send ping info no level]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v\\nwant %s", got, want)
	}
}

// A key of a shared rule longer than 1 KiB is followed as its SHA-256: a
// client cannot make a node hold megabytes a key.
