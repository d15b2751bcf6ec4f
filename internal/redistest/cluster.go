package redistest

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterTimeout bounds how long a new cluster may take to reach
// cluster_state:ok.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of masters owned by one test.
type Cluster struct {
	// Servers are the masters; their Addrs seed a cluster client.
	Servers []*Server
}

// Addrs are the masters' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// StartCluster runs a Redis Cluster of n masters (no replicas) for t,
// created with redis-cli --cluster create, and waits until every node
// reports cluster_state:ok. It skips the test if redis-server has no
// cluster support or redis-cli is missing.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	cli := Binary(t, "redis-cli")
	bin := Binary(t, "redis-server")
	if out, err := exec.Command(bin, "--version").Output(); err != nil || bytes.Contains(out, []byte("v=2.")) || bytes.Contains(out, []byte("v=1.")) {
		t.Skipf("redistest: %s has no cluster support (%s)", bin, bytes.TrimSpace(out))
	}
	c := &Cluster{}
	for range n {
		port := clusterPort(t)
		c.Servers = append(c.Servers, startOn(t, port, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Skipf("redistest: redis-cli --cluster create: %v: %s", err, tail(out))
	}
	deadline := time.Now().Add(clusterTimeout)
	for _, s := range c.Servers {
		host, port, _ := net.SplitHostPort(s.Addr)
		for {
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && bytes.Contains(out, []byte("cluster_state:ok")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok within %s: %s", s.Addr, clusterTimeout, tail(out))
			}
			time.Sleep(20 * time.Millisecond) // a poll interval
		}
	}
	return c
}

// clusterPort finds a free port whose cluster bus port (+10000) is free
// too.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := FreePort(t)
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("redistest: no free port pair for a cluster node")
	return 0
}

// String lists the cluster's addresses.
func (c *Cluster) String() string { return fmt.Sprintf("cluster %s", strings.Join(c.Addrs(), ",")) }
