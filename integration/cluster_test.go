package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The cluster tests run caddyfile_examples/cluster.Caddyfile on three
// Caddy processes on loopback, gossiping on ports of their own: the
// limit is 200 requests per second per API key across the three.
const (
	clusterLimit   = 200
	clusterOffered = 2 * clusterLimit                               // requests per second the load sends
	clusterKey     = "c2VjcmV0LWtleS1mb3ItdGVzdHMtMzItYnl0ZXMhISE=" // 32 bytes
	otherKey       = "b3RoZXIta2V5LWZvci10ZXN0cy0zMi1ieXRlcyEhISE=" // 32 bytes
)

// clusterView is GET /rate_limit/cluster, as the tests read it.
type clusterView struct {
	Enabled bool   `json:"enabled"`
	Node    string `json:"node"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
	Live     int  `json:"live"`
	Minority bool `json:"minority"`
	Shares   []struct {
		Rule  string  `json:"rule"`
		Key   string  `json:"key"`
		Share float64 `json:"share"`
	} `json:"shares"`
	Gossip struct {
		BytesSent    uint64            `json:"bytes_sent"`
		Dropped      map[string]uint64 `json:"dropped"`
		JoinAttempts uint64            `json:"join_attempts"`
		JoinFailures uint64            `json:"join_failures"`
	} `json:"gossip"`
}

// alive is the names of the members the view lists alive.
func (v clusterView) alive() []string {
	var names []string
	for _, m := range v.Members {
		if m.State == "alive" {
			names = append(names, m.Name)
		}
	}
	return names
}

// startCluster starts n nodes of the example, each told to join all of
// them and given env, and waits until every node sees all n alive.
func startCluster(t *testing.T, n int, env ...string) []*caddyProc {
	t.Helper()
	return startNodes(t, n, func(env ...string) *caddyProc { return startExample(t, "cluster.Caddyfile", env...) }, env...)
}

// nodeGlobal is the global options of a node that startNodes starts: a
// cluster on the gossip address, the join list and the name it gives.
const nodeGlobal = `{
	{{.Global}}
	rate_limit {
		cluster {
			bind {$EDGELIMIT_GOSSIP_BIND}
			join {$EDGELIMIT_GOSSIP_JOIN}
			node_name {$EDGELIMIT_NODE}
			sync_interval 100ms
		}
	}
}
`

// startNodes starts n nodes with start, each named edge-N and told to bind
// its gossip port and join all of them (EDGELIMIT_NODE,
// EDGELIMIT_GOSSIP_BIND, EDGELIMIT_GOSSIP_JOIN, EDGELIMIT_GOSSIP_KEY) and
// given env, and waits until every node sees all n alive.
func startNodes(t *testing.T, n int, start func(env ...string) *caddyProc, env ...string) []*caddyProc {
	t.Helper()
	ports := freePorts(t, n)
	var join []string
	for _, p := range ports {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", p))
	}
	nodes := make([]*caddyProc, n)
	for i := range nodes {
		nodes[i] = start(append([]string{
			fmt.Sprintf("EDGELIMIT_NODE=edge-%d", i+1),
			"EDGELIMIT_GOSSIP_BIND=" + join[i],
			"EDGELIMIT_GOSSIP_JOIN=" + strings.Join(join, " "),
			"EDGELIMIT_GOSSIP_KEY=" + clusterKey}, env...)...)
	}
	for _, p := range nodes {
		p.waitMembers(t, n)
	}
	return nodes
}

// caddyOf starts Caddy on caddyfile, for startNodes.
func caddyOf(t *testing.T, caddyfile string) func(env ...string) *caddyProc {
	return func(env ...string) *caddyProc { return startCaddy(t, caddyfile, env...) }
}

// waitMembers polls the node's cluster view every 20 ms, for up to 10 s,
// until it lists n members alive.
func (p *caddyProc) waitMembers(t *testing.T, n int) clusterView {
	t.Helper()
	var v clusterView
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.adminJSON(t, "/rate_limit/cluster", &v)
		if len(v.alive()) == n {
			return v
		}
	}
	t.Fatalf("%s sees %v alive, want %d members", v.Node, v.alive(), n)
	return v
}

// load sends clusterOffered requests per second of one API key for
// seconds, each to the node that pick names for the time since the start,
// and returns the requests admitted (200) in each second.
func load(t *testing.T, seconds int, pick func(since time.Duration) *caddyProc) []int {
	return loadPath(t, "/api/x", seconds, pick)
}

// loadPath is load on path.
func loadPath(t *testing.T, path string, seconds int, pick func(since time.Duration) *caddyProc) []int {
	return loadCounted(t, path, seconds, false, pick)
}

// loadCounted is load on path, counting each admitted request in the
// second it was sent in, or if byCompletion, in the second its answer
// came (a request held by a paused node counts when it is answered).
func loadCounted(t *testing.T, path string, seconds int, byCompletion bool, pick func(since time.Duration) *caddyProc) []int {
	t.Helper()
	start := time.Now()
	work, done := fleetSenders(16, clusterOffered, start, path, "fleet-key", seconds, byCompletion, pick)
	// 10 requests every 25 ms: clusterOffered per second, spread evenly
	tick := time.NewTicker(25 * time.Millisecond)
	for now := range tick.C {
		if now.Sub(start) >= time.Duration(seconds)*time.Second {
			break
		}
		for range clusterOffered / 40 {
			select {
			case work <- now.Sub(start):
			default: // the nodes fall behind: offered less
			}
		}
	}
	tick.Stop()
	close(work)
	return done(t)
}

// fleetSenders sends each request put on work (its time since start) of
// key on path to the node pick names, from n goroutines (work holds up to
// buffer waiting), and counts the 200s in the second each was sent in, or
// if byCompletion, answered in. Close work, then done waits for the
// answers, fails t on a transport error or a status other than 200 and
// 429, and returns the counts of the first seconds.
func fleetSenders(n, buffer int, start time.Time, path, key string, seconds int, byCompletion bool, pick func(since time.Duration) *caddyProc) (chan<- time.Duration, func(*testing.T) []int) {
	admitted := make([]int, seconds)
	var mu sync.Mutex
	var failed error
	work := make(chan time.Duration, buffer)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for since := range work {
				code, _, err := pick(since).rawGet(context.Background(), path, "X-Api-Key", key)
				sec := int(since / time.Second)
				if byCompletion {
					sec = int(time.Since(start) / time.Second)
				}
				mu.Lock()
				switch {
				case err != nil:
					failed = err
				case code == http.StatusOK && sec < seconds:
					admitted[sec]++
				case code != http.StatusTooManyRequests && code != http.StatusOK:
					failed = fmt.Errorf("status %d", code)
				}
				mu.Unlock()
			}
		}()
	}
	return work, func(t *testing.T) []int {
		t.Helper()
		wg.Wait()
		if failed != nil {
			t.Fatalf("load: %v", failed)
		}
		return admitted
	}
}

// alternate picks nodes[0] and nodes[1] in turn, as a round-robin load
// balancer would; it reads the slice at each pick, so a node restarted in
// place takes its turns.
func alternate(nodes []*caddyProc) func(time.Duration) *caddyProc {
	var turn atomic.Int64
	return func(time.Duration) *caddyProc { return nodes[turn.Add(1)%2] }
}

// ratios is admitted/L per second.
func ratios(admitted []int) []float64 {
	out := make([]float64, len(admitted))
	for i, a := range admitted {
		out[i] = float64(a) / clusterLimit
	}
	return out
}

// wantWithin fails t unless every second of admitted from the first on is
// within [lo, hi]×L (second 0 only needs to stay under hi).
func wantWithin(t *testing.T, phase string, admitted []int, first int, lo, hi float64) {
	t.Helper()
	r := ratios(admitted)
	t.Logf("%s: admitted/L per second %.2f", phase, r)
	for i, x := range r {
		if x > hi || (i >= first && x < lo) {
			t.Errorf("%s: second %d admitted %.2f×L, want %.2f–%.2f×L (from second %d; at most %.2f before)", phase, i, x, lo, hi, first, hi)
		}
	}
}

// TestExampleCluster: three nodes hold one limit together wherever the
// traffic lands, including after one is killed (kill -9, no leave).
func TestExampleCluster(t *testing.T) {
	nodes := startCluster(t, 3)
	a, b := nodes[0], nodes[1]

	all := load(t, 3, func(time.Duration) *caddyProc { return a })
	wantWithin(t, "all on node 1", all, 1, 0.9, 1.1)

	moved := load(t, 3, func(time.Duration) *caddyProc { return b })
	wantWithin(t, "moved to node 2", moved, 1, 0.9, 1.1)

	split := load(t, 3, alternate(nodes))
	wantWithin(t, "split over nodes 1 and 2", split, 1, 0.9, 1.1)

	var v clusterView
	b.adminJSON(t, "/rate_limit/cluster", &v)
	if len(v.Shares) == 0 || v.Shares[0].Key != "fleet-key" || v.Shares[0].Rule == "" {
		t.Errorf("node 2's hot keys %+v, want fleet-key", v.Shares)
	}

	// A reload keeps the node: no rebind, no rejoin, the same members.
	before := v
	b.forceReload(t, withGlobals(exampleText(t, "cluster.Caddyfile")))
	b.adminJSON(t, "/rate_limit/cluster", &v)
	if v.Node != before.Node || v.Gossip.JoinAttempts != before.Gossip.JoinAttempts || len(v.alive()) != 3 {
		t.Errorf("after a reload: node %s, %d join attempts, alive %v; want %s, %d, the 3 nodes",
			v.Node, v.Gossip.JoinAttempts, v.alive(), before.Node, before.Gossip.JoinAttempts)
	}
	if !strings.Contains(b.log(), "cluster node started") || strings.Count(b.log(), "cluster node started") != 1 {
		t.Errorf("the node started %d times, want once", strings.Count(b.log(), "cluster node started"))
	}

	_, metrics := b.admin(t, http.MethodGet, "/metrics", "")
	if got := metricValue(t, metrics, "caddy_rate_limit_cluster_members"); got != "3" {
		t.Errorf("caddy_rate_limit_cluster_members = %s, want 3", got)
	}
	if got := metricValue(t, metrics, `caddy_rate_limit_gossip_bytes_total{direction="sent"}`); got == "absent" || got == "0" {
		t.Errorf("gossip bytes sent = %s, want some", got)
	}

	// A reset on a node that never saw the key reaches the others.
	c := nodes[2]
	code, body := c.admin(t, http.MethodDelete, "/rate_limit/rules/api/keys/fleet-key", "")
	var reset struct {
		Reset        bool   `json:"reset"`
		Cluster      bool   `json:"cluster"`
		ClusterError string `json:"cluster_error"`
	}
	if err := json.Unmarshal([]byte(body), &reset); code != 200 || err != nil || reset.Reset || !reset.Cluster || reset.ClusterError != "" {
		t.Errorf("DELETE on node 3: %d %s, want 200, no state here, sent to the cluster", code, body)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, _ := b.admin(t, http.MethodGet, "/rate_limit/rules/api/keys/fleet-key", "")
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 still has fleet-key 5 s after the reset on node 3 (%d)", code)
		}
	}

	a.cmd.Process.Kill() // kill -9: no leave message
	<-a.exited
	killed := load(t, 4, func(time.Duration) *caddyProc { return b })
	wantWithin(t, "node 1 killed, all on node 2", killed, 1, 0.9, 1.1)

	// Node 1 comes back (a new process, same gossip address) and takes
	// half the traffic again: it counts the cluster its join list names
	// until it has joined, then learns the shares; no burst.
	a = startExample(t, "cluster.Caddyfile", a.env...)
	nodes[0] = a
	back := loadCounted(t, "/api/x", 3, true, alternate(nodes))
	wantWithin(t, "node 1 restarted, split over nodes 1 and 2", back, 1, 0.9, 1.1)

	// The per-node rule stays per node: 5 a minute on each.
	for _, p := range nodes[1:] {
		if got := count(t, 6, func() int { return p.status(t, "/login") }); fmt.Sprint(got) != "map[200:5 429:1]" {
			t.Errorf("/login on %s: %v, want 5×200 then 429", p.data.Admin, got)
		}
	}
}

// TestExampleClusterSlidingWindow: the same with the default algorithm,
// whose nodes report their use of the window in force, so that a share
// that moves leaves room for it. A sliding window is an estimate: its
// first two seconds admit up to 1.3×L in a second not aligned on its
// windows (alone too: the first window fills at once, the next lets its
// estimate decay), and it leaves more unused than a token bucket while
// shares move (0.88×L and up measured; judged from 0.8×L, as this test
// shares the machine with the other tests).
func TestExampleClusterSlidingWindow(t *testing.T) {
	nodes := startCluster(t, 3)
	a, b := nodes[0], nodes[1]
	all := loadPath(t, "/search/x", 4, func(time.Duration) *caddyProc { return a })
	wantWithin(t, "all on node 1", all[2:], 0, 0.8, 1.1)
	moved := loadPath(t, "/search/x", 3, func(time.Duration) *caddyProc { return b })
	wantWithin(t, "moved to node 2", moved, 1, 0.8, 1.1)
	split := loadPath(t, "/search/x", 3, alternate(nodes))
	wantWithin(t, "split over nodes 1 and 2", split, 1, 0.8, 1.1)
}

// TestExampleClusterPause: a node stopped (SIGSTOP) under load, its
// clients sent to the others meanwhile, then continued (SIGCONT): it
// answers the requests it held, and learns the shares again, without a
// burst above the limit, under each on_partition policy (the two nodes
// left are a majority, so the policy only rules the stopped node's first
// moments back, when it has heard no one for 3 s).
func TestExampleClusterPause(t *testing.T) {
	for _, policy := range []string{"local_share", "fail_closed", "fail_open"} {
		t.Run(policy, func(t *testing.T) { testPause(t, policy) })
	}
}

func testPause(t *testing.T, policy string) {
	nodes := startCluster(t, 3, "EDGELIMIT_ON_PARTITION="+policy)
	a, b := nodes[0], nodes[1]
	var paused atomic.Bool
	both := alternate(nodes)
	split := func(since time.Duration) *caddyProc {
		if paused.Load() {
			return a // a load balancer takes the stopped node out
		}
		return both(since)
	}
	// The warm-up only sets the stage (TestExampleCluster holds a split to
	// 0.9×L): judged from 0.8×L, as a CI run on two busy cores once
	// admitted 0.87×L in its second second.
	warm := load(t, 3, split)
	wantWithin(t, "split over nodes 1 and 2", warm, 1, 0.8, 1.1)

	done := make(chan []int)
	go func() { done <- loadCounted(t, "/api/x", 7, true, split) }()
	time.Sleep(time.Second) // the fault's timing, not a wait for a result
	paused.Store(true)
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	paused.Store(false)
	got := <-done
	t.Logf("%s: admitted/L by second: %.2f", policy, ratios(got))
	// second 1: the pause starts, and node 1 keeps its half share until
	// node 2's reports expire; seconds 2 and 3: node 1 has the whole
	// limit; second 4: node 2 is back, answers the requests it held and
	// learns the shares again (no burst: at most 1.1×L), a move of half
	// the traffic (0.85–0.91×L measured); then back within the limit
	wantWithin(t, "node 2 stopped for 3 s at 1 s", got[:4], 2, 0.9, 1.1)
	wantWithin(t, "node 2 continued at 4 s", got[4:], 1, 0.9, 1.1)
}

// TestExampleClusterWrongKey: a node with another secret_key cannot join.
func TestExampleClusterWrongKey(t *testing.T) {
	nodes := startCluster(t, 2)
	ports := freePorts(t, 1)
	bind := fmt.Sprintf("127.0.0.1:%d", ports[0])
	var v clusterView
	nodes[0].adminJSON(t, "/rate_limit/cluster", &v)
	intruder := startExample(t, "cluster.Caddyfile",
		"EDGELIMIT_NODE=intruder",
		"EDGELIMIT_GOSSIP_BIND="+bind,
		"EDGELIMIT_GOSSIP_JOIN="+nodes[0].gossipAddr(t),
		"EDGELIMIT_GOSSIP_KEY="+otherKey)
	// wait for its join to have failed twice
	var iv clusterView
	for deadline := time.Now().Add(10 * time.Second); iv.Gossip.JoinFailures < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("intruder: %d join attempts, %d failures after 10 s", iv.Gossip.JoinAttempts, iv.Gossip.JoinFailures)
		}
		intruder.adminJSON(t, "/rate_limit/cluster", &iv)
	}
	if got := iv.alive(); fmt.Sprint(got) != "[intruder]" {
		t.Errorf("the intruder sees %v alive, want only itself", got)
	}
	for _, p := range nodes {
		p.adminJSON(t, "/rate_limit/cluster", &v)
		if got := v.alive(); len(got) != 2 || strings.Contains(fmt.Sprint(got), "intruder") {
			t.Errorf("%s sees %v alive, want the two nodes only", v.Node, got)
		}
	}
}

// exampleText is an example Caddyfile as startExample runs it, as a
// template for reload.
func exampleText(t *testing.T, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "caddyfile_examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gossipAddr is the node's gossip address, from its cluster view.
func (p *caddyProc) gossipAddr(t *testing.T) string {
	t.Helper()
	var v struct {
		Addr string `json:"addr"`
	}
	p.adminJSON(t, "/rate_limit/cluster", &v)
	return v.Addr
}

// TestExampleClusterPartition: three nodes in network namespaces; the
// gossip between node 1 and nodes 2 and 3 is cut for 4 s
// (EDGELIMIT_PARTITION_SECONDS sets a longer cut), with
// the traffic split over nodes 1 and 2, then mended, under each
// on_partition policy. Node 1 is a strict minority: under local_share it
// keeps a third of its share (at most 10% of L for its side) while nodes 2
// and 3 take its share back, at most 1.1×L in every second; under
// fail_closed it denies, at most L; under fail_open it admits up to L
// alone, its half of the traffic. Two seconds after the heal, back within
// 10% of L.
func TestExampleClusterPartition(t *testing.T) {
	cut := envInt(t, "EDGELIMIT_PARTITION_SECONDS", 4)
	for _, c := range []struct {
		policy string
		most   float64 // admitted/L in a second of the partition
	}{{"local_share", 1.1}, {"fail_closed", 1.02}, {"fail_open", 2.05}} { // fail_closed: 0.99–1.00 measured, 2% for where a second of counting falls
		t.Run(c.policy, func(t *testing.T) {
			nn := newNetnet(t, 3)
			var join []string
			for _, ip := range nn.ips {
				join = append(join, ip+":7946")
			}
			nodes := make([]*caddyProc, 3)
			for i := range nodes {
				nodes[i] = startExampleAt(t, nn.place(i), "cluster.Caddyfile",
					fmt.Sprintf("EDGELIMIT_NODE=edge-%d", i+1),
					"EDGELIMIT_GOSSIP_BIND="+join[i],
					"EDGELIMIT_GOSSIP_JOIN="+strings.Join(join, " "),
					"EDGELIMIT_GOSSIP_KEY="+clusterKey,
					"EDGELIMIT_ON_PARTITION="+c.policy)
			}
			for _, p := range nodes {
				p.waitMembers(t, 3)
			}
			split := alternate(nodes)
			warm := load(t, 2, split)
			wantWithin(t, "split over nodes 1 and 2", warm, 1, 0.9, 1.1)

			done := make(chan []int)
			go func() { done <- load(t, cut+5, split) }()
			time.Sleep(time.Second) // the fault's timing, not a wait for a result
			nn.partition([]int{0}, []int{1, 2})
			time.Sleep(time.Duration(cut) * time.Second)
			var v clusterView
			nodes[0].adminJSON(t, "/rate_limit/cluster", &v)
			nn.heal()
			got := <-done
			if !v.Minority {
				t.Errorf("node 1, cut off from the others, did not see itself a minority: %+v", v)
			}
			// seconds 1 to cut: the partition (the first, node 2 keeps its
			// half until node 1's reports expire); cut+1: the heal, whose
			// first moments are still the partition's (fail_open:
			// 1.06–1.11×L); the 3 after: healed
			t.Logf("%s, cut for %d s: admitted/L by second: %.2f", c.policy, cut, ratios(got))
			wantWithin(t, fmt.Sprintf("node 1 cut off at 1 s, healed at %d s", cut+1), got[:cut+2], 9, 0, c.most)
			wantWithin(t, "after the heal", got[cut+2:], 1, 0.9, 1.1)
		})
	}
}
