// Package clusternode runs this process's node of an edgelimit cluster:
// its membership (gossip.Cluster), its side of the quota sharing
// (gossip.Sharing) and the loop that sends its report every sync
// interval. Nodes live in a process-wide caddy.UsagePool keyed by bind
// address, so that a Caddy reload with the same cluster block keeps the
// node (no rebind, no rejoin), and one with a changed block stops it and
// starts another on the same address. It touches no state of caddymodule:
// a reset learnt from another node goes to the callback given to Acquire.
package clusternode

import (
	"log"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/gossip"
)

// Settings is a cluster block with its placeholders replaced and its
// values parsed: what a node is built from.
type Settings struct {
	// Gossip is the membership's configuration.
	Gossip gossip.Config
	// Policy is on_partition; PolicyText its name, for the log.
	Policy     gossip.PartitionPolicy
	PolicyText string
	// MaxKeys bounds the hot keys the node follows (0: the default).
	MaxKeys int
	// Print is the whole configuration, for telling whether a reload
	// changed it: a node is kept across a reload with the same Print.
	Print string
	// OnBlock takes the blocks other nodes made (gossip.SharingConfig's
	// OnBlock); nil: they are dropped.
	OnBlock func(rule uint64, key string, until time.Time, offences int)
}

// Node is this process's membership of the cluster and its side of the
// quota sharing. It outlives configs: a reload that keeps the cluster
// settings keeps the node (see Acquire).
type Node struct {
	// Cluster is the membership: members, reports, resets.
	Cluster *gossip.Cluster
	// Sharing divides each hot key's limit between the nodes.
	Sharing *gossip.Sharing

	bind   string
	print  string // Settings.Print
	policy string
	ready  atomic.Pointer[gossip.Sharing] // sharing, once set up: for memberlist's goroutine
	logger *zap.Logger

	expected int       // the nodes the join list names, this one included
	started  time.Time // when the node started
	stop     chan struct{}
	done     chan struct{}
}

// start binds, starts the membership (joining in the background) and the
// sync loop. reset forgets a key that another node's admin API reset.
func start(s Settings, logger *zap.Logger, reset func(rule, key string)) (*Node, error) {
	n := &Node{
		bind: s.Gossip.Bind, print: s.Print, policy: s.PolicyText, logger: logger,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	cfg := s.Gossip
	cfg.Logger = log.New(memberlistLog{logger.Named("memberlist")}, "", 0)
	c, err := gossip.New(cfg, n.observe, reset)
	if err != nil {
		return nil, err
	}
	n.Cluster = c
	n.Sharing = gossip.NewSharing(gossip.SharingConfig{
		Self: c.Name(), Interval: c.SyncInterval(), OnPartition: s.Policy, MaxKeys: s.MaxKeys,
		OnBlock: s.OnBlock,
	})
	// For joinGrace, a node counts at least the cluster its join list
	// names (with itself): a node that restarts does not limit as if it
	// were alone, or in a smaller cluster, admitting a burst, while it
	// meets the others and learns the shares again.
	n.expected = expectedSize(cfg.Join, c.Addr(), cfg.Bind)
	n.Sharing.SetClusterSize(n.expected)
	n.started = time.Now()
	n.ready.Store(n.Sharing)
	logger.Info("cluster node started",
		zap.String("node", c.Name()), zap.String("addr", c.Addr()),
		zap.Strings("join", cfg.Join), zap.Duration("sync_interval", c.SyncInterval()),
		zap.String("on_partition", s.PolicyText), zap.Bool("encrypted", len(cfg.SecretKeys) > 0))
	go n.sync()
	return n, nil
}

// observe takes a report from another node (from memberlist's side, which
// may call it before start has set the sharing up).
func (n *Node) observe(r gossip.Report) {
	if sh := n.ready.Load(); sh != nil {
		sh.Observe(r, time.Now())
	}
}

// expectedSize is the number of nodes a join list names, this node (at
// one of its addresses) included.
func expectedSize(join []string, self ...string) int {
	nodes := make(map[string]bool)
	for _, j := range join {
		nodes[j] = true
	}
	for _, a := range self {
		if nodes[a] {
			return len(nodes)
		}
	}
	return len(nodes) + 1
}

// joinGrace is how long a starting node counts at least the nodes of its
// join list: past it, a node whose seeds are all down (the first of a
// fleet to start) limits as the cluster it is.
const joinGrace = 10 * time.Second

// sync sends this node's report every interval, and keeps the cluster size
// the shares are computed for up to date.
func (n *Node) sync() {
	defer close(n.done)
	t := time.NewTicker(n.Cluster.SyncInterval())
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			size := Size(n.Cluster.Members(), now)
			if now.Sub(n.started) < joinGrace {
				// Joining: the first seed met is not the whole cluster.
				// Counted smaller, the node would take a larger cold
				// share than the nodes still joining leave it (the
				// fleet would hold more than a limit in sum: 3+2+2 of
				// a max_concurrent 6 over three nodes).
				size = max(size, n.expected)
			}
			n.Sharing.SetClusterSize(size)
			r := n.Sharing.Tick(now)
			if err := n.Cluster.Broadcast(&r); err != nil {
				n.logger.Debug("sending report", zap.Error(err))
			}
		}
	}
}

// Size is the number of nodes that share the limits at now: the
// members alive, and those declared dead within deadMemory (a dead node
// may be on the other side of a partition: counting it lets on_partition
// see the minority), but not those that left.
func Size(members []gossip.Member, now time.Time) int {
	n := 0
	for _, m := range members {
		switch m.State {
		case gossip.StateAlive:
			n++
		case gossip.StateDead:
			if now.Sub(m.Since) < deadMemory {
				n++
			}
		}
	}
	return n
}

// deadMemory is how long a member declared dead still counts in the
// cluster size. Longer holds on_partition through longer partitions;
// shorter forgets sooner the nodes that crashed and never came back
// (replaced under other names): while they count, the cold share is
// smaller, and a fleet that lost half its nodes at once is a minority.
const deadMemory = 5 * time.Minute

// close leaves the cluster and stops the sync loop.
func (n *Node) close() {
	close(n.stop)
	<-n.done
	if err := n.Cluster.Close(); err != nil {
		n.logger.Warn("leaving the cluster", zap.Error(err))
	}
	n.logger.Info("cluster node stopped", zap.String("node", n.Cluster.Name()))
}

// Policy is the node's on_partition, by name.
func (n *Node) Policy() string { return n.policy }
