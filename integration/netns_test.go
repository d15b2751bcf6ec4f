package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// netnet is a small network of namespaces for cluster tests: a bridge in
// the test's own namespace and, per node, a namespace joined to it by a
// veth pair. The test reaches every node; partition cuts the nodes of one
// group off from those of another (blackhole routes), as a network split
// between sites would, and heal mends it.
type netnet struct {
	t      *testing.T
	bridge string
	ns     []string
	ips    []string
	cut    [][2]int // the routes partition added: from node, to node
}

// netnets counts the networks made, for unique names.
var netnets atomic.Int64

// newNetnet makes n namespaced nodes, removed when t ends; it skips t
// where namespaces cannot be made (not root).
func newNetnet(t *testing.T, n int) *netnet {
	t.Helper()
	// names and subnet unique per network: a namespace's veth outlives
	// its deletion for a moment, so a later test must not reuse them
	id := fmt.Sprintf("%d%d", os.Getpid()%100000, netnets.Add(1)%100)
	subnet := fmt.Sprintf("10.77.%d", (os.Getpid()+int(netnets.Load()))%250)
	nn := &netnet{t: t, bridge: "elbr" + id}
	if err := exec.Command("ip", "link", "add", nn.bridge, "type", "bridge").Run(); err != nil {
		t.Skipf("no network namespaces here (ip link add: %v): the in-process partition tests of gossip/ stand in", err)
	}
	t.Cleanup(func() {
		for _, ns := range nn.ns {
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", nn.bridge).Run()
	})
	nn.run("ip", "addr", "add", subnet+".254/24", "dev", nn.bridge)
	nn.run("ip", "link", "set", nn.bridge, "up")
	for i := range n {
		ns, host, peer := fmt.Sprintf("el%s-%d", id, i+1), fmt.Sprintf("elv%sh%d", id, i+1), fmt.Sprintf("elv%sn%d", id, i+1)
		ip := fmt.Sprintf("%s.%d", subnet, i+1)
		nn.run("ip", "netns", "add", ns)
		nn.ns, nn.ips = append(nn.ns, ns), append(nn.ips, ip)
		nn.run("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
		nn.run("ip", "link", "set", peer, "netns", ns)
		nn.run("ip", "link", "set", host, "master", nn.bridge)
		nn.run("ip", "link", "set", host, "up")
		nn.run("ip", "-n", ns, "link", "set", peer, "name", "eth0")
		nn.run("ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		nn.run("ip", "-n", ns, "link", "set", "eth0", "up")
		nn.run("ip", "-n", ns, "link", "set", "lo", "up")
	}
	return nn
}

func (nn *netnet) run(args ...string) {
	nn.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		nn.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// place is where node i runs.
func (nn *netnet) place(i int) place { return place{netns: nn.ns[i], ip: nn.ips[i]} }

// partition cuts every node of a off from every node of b, both ways.
func (nn *netnet) partition(a, b []int) {
	nn.t.Helper()
	for _, i := range a {
		for _, j := range b {
			for _, c := range [][2]int{{i, j}, {j, i}} {
				nn.run("ip", "-n", nn.ns[c[0]], "route", "add", "blackhole", nn.ips[c[1]]+"/32")
				nn.cut = append(nn.cut, c)
			}
		}
	}
}

// heal removes every cut.
func (nn *netnet) heal() {
	nn.t.Helper()
	for _, c := range nn.cut {
		nn.run("ip", "-n", nn.ns[c[0]], "route", "del", "blackhole", nn.ips[c[1]]+"/32")
	}
	nn.cut = nil
}
