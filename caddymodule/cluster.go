package caddymodule

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// ClusterConfig makes this Caddy one node of a fleet that shares every
// rule's limit (rules with scope cluster, the default once a cluster is
// configured): each node decides its requests alone, and the nodes gossip
// the demand of their hot keys every sync_interval to divide each key's
// limit between them (see package gossip).
type ClusterConfig struct {
	// Bind is the host:port that cluster traffic uses, UDP and TCP.
	// Default: 0.0.0.0:7946.
	Bind string `json:"bind,omitempty"`

	// Advertise is the host:port other nodes reach this one at, when it is
	// not Bind (NAT, containers). Default: the bound address.
	Advertise string `json:"advertise,omitempty"`

	// Join lists nodes to join (host:port). They are joined in the
	// background, retried until this node is in a cluster; Caddy never
	// waits for them. A list may name this node too, so that every node
	// can have the same one. Default: none (wait to be joined).
	Join []string `json:"join,omitempty"`

	// SecretKeys are base64 AES keys of 16, 24 or 32 bytes that encrypt
	// and authenticate all cluster traffic: the first encrypts, every one
	// decrypts, so a key is rotated by adding the new one second on every
	// node, then first, then removing the old. Placeholders such as
	// {env.EDGELIMIT_GOSSIP_KEY} are replaced. Required unless Bind is a
	// loopback address.
	SecretKeys []string `json:"secret_keys,omitempty"`

	// NodeName is this node's name in the cluster, unique. Default: the
	// host name and the gossip port.
	NodeName string `json:"node_name,omitempty"`

	// Label keeps clusters apart on one network: nodes join only nodes
	// with the same label. Default: edgelimit.
	Label string `json:"label,omitempty"`

	// SyncInterval is how often the nodes exchange demand. Default: 100ms.
	SyncInterval caddy.Duration `json:"sync_interval,omitempty"`

	// OnPartition is what a node that sees no majority of the cluster does:
	// local_share (the nodes it sees keep their shares: a partition admits
	// at most 1.1 times the limit), fail_open (each of them admits up to
	// the whole limit) or fail_closed (they deny). Default: local_share.
	OnPartition string `json:"on_partition,omitempty"`

	// MaxKeys bounds the hot keys a node follows (near their share on it
	// or hot elsewhere); past it, keys keep the cold share, 1.1/N of the
	// limit. Default: 10000.
	MaxKeys int `json:"max_keys,omitempty"`
}

// The values of on_partition.
const (
	partitionLocalShare = "local_share"
	partitionFailOpen   = "fail_open"
	partitionFailClosed = "fail_closed"
)

// clusterSettings is a ClusterConfig with its placeholders replaced and
// its values parsed: what a cluster node is built from.
type clusterSettings struct {
	gossip    gossip.Config
	policy    gossip.PartitionPolicy
	maxKeys   int
	policyTxt string
	print     string // the configuration, for telling whether a reload changed it
}

// settings checks the configuration and parses it.
func (c *ClusterConfig) settings() (clusterSettings, error) {
	repl := caddy.NewReplacer()
	s := clusterSettings{maxKeys: c.MaxKeys, policyTxt: c.OnPartition}
	g := &s.gossip
	g.Bind = repl.ReplaceKnown(c.Bind, "")
	if g.Bind == "" {
		g.Bind = gossip.DefaultBind
	}
	if _, _, err := net.SplitHostPort(g.Bind); err != nil {
		return s, fmt.Errorf("cluster bind %q: want host:port", g.Bind)
	}
	g.Advertise = repl.ReplaceKnown(c.Advertise, "")
	if _, _, err := net.SplitHostPort(g.Advertise); g.Advertise != "" && err != nil {
		return s, fmt.Errorf("cluster advertise %q: want host:port", g.Advertise)
	}
	for _, j := range c.Join {
		j = repl.ReplaceKnown(j, "")
		if _, _, err := net.SplitHostPort(j); err != nil {
			return s, fmt.Errorf("cluster join %q: want host:port", j)
		}
		g.Join = append(g.Join, j)
	}
	for i, k := range c.SecretKeys {
		raw, err := parseSecretKey(i, repl.ReplaceKnown(k, ""))
		if err != nil {
			return s, err
		}
		g.SecretKeys = append(g.SecretKeys, raw)
	}
	if err := gossip.CheckBind(g.Bind, len(g.SecretKeys)); err != nil {
		return s, fmt.Errorf("cluster bind %s: %v", g.Bind, err)
	}
	g.NodeName = repl.ReplaceKnown(c.NodeName, "")
	g.Label = c.Label
	g.SyncInterval = time.Duration(c.SyncInterval)
	if g.SyncInterval < 0 {
		return s, fmt.Errorf("cluster sync_interval %s: must be positive", g.SyncInterval)
	}
	if g.SyncInterval == 0 {
		g.SyncInterval = gossip.DefaultSyncInterval
	}
	switch c.OnPartition {
	case "", partitionLocalShare:
		s.policy, s.policyTxt = gossip.LocalShare, partitionLocalShare
	case partitionFailOpen:
		s.policy = gossip.FailOpen
	case partitionFailClosed:
		s.policy = gossip.FailClosed
	default:
		return s, fmt.Errorf("cluster on_partition %q: want local_share, fail_open or fail_closed", c.OnPartition)
	}
	if c.MaxKeys < 0 {
		return s, fmt.Errorf("cluster max_keys %d: must not be negative", c.MaxKeys)
	}
	print, _ := json.Marshal(struct {
		Bind, Advertise, NodeName, Label string
		Join                             []string
		Keys                             [][]byte
		Interval                         time.Duration
		Policy                           gossip.PartitionPolicy
		MaxKeys                          int
	}{g.Bind, g.Advertise, g.NodeName, g.Label, g.Join, g.SecretKeys, g.SyncInterval, s.policy, s.maxKeys})
	s.print = string(print)
	return s, nil
}

// clusterNode is this process's membership of the cluster and its side of
// the quota sharing. It outlives configs: a reload that keeps the cluster
// configuration keeps the node (see clusters).
type clusterNode struct {
	bind    string
	print   string // clusterSettings.print
	policy  string
	cluster *gossip.Cluster
	sharing *gossip.Sharing
	ready   atomic.Pointer[gossip.Sharing] // sharing, once set up: for memberlist's goroutine
	logger  *zap.Logger

	expected int       // the nodes the join list names, this one included
	started  time.Time // when the node started
	joined   bool      // it has seen another member; only the sync loop reads it
	stop     chan struct{}
	done     chan struct{}
}

// startClusterNode binds, starts the membership (joining in the
// background) and the sync loop.
func startClusterNode(s clusterSettings, logger *zap.Logger) (*clusterNode, error) {
	n := &clusterNode{
		bind: s.gossip.Bind, print: s.print, policy: s.policyTxt, logger: logger,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	cfg := s.gossip
	cfg.Logger = log.New(memberlistLog{logger.Named("memberlist")}, "", 0)
	c, err := gossip.New(cfg, n.observe, resetLocal)
	if err != nil {
		return nil, err
	}
	n.cluster = c
	n.sharing = gossip.NewSharing(gossip.SharingConfig{
		Self: c.Name(), Interval: c.SyncInterval(), OnPartition: s.policy, MaxKeys: s.maxKeys,
	})
	// Until it has joined, a node counts the cluster its join list names
	// (with itself): a node that restarts does not limit as if it were
	// alone, admitting a burst, while it learns the shares again.
	n.expected = expectedSize(cfg.Join, c.Addr(), cfg.Bind)
	n.sharing.SetClusterSize(n.expected)
	n.started = time.Now()
	n.ready.Store(n.sharing)
	logger.Info("cluster node started",
		zap.String("node", c.Name()), zap.String("addr", c.Addr()),
		zap.Strings("join", cfg.Join), zap.Duration("sync_interval", c.SyncInterval()),
		zap.String("on_partition", s.policyTxt), zap.Bool("encrypted", len(cfg.SecretKeys) > 0))
	go n.sync()
	return n, nil
}

// observe takes a report from another node (from memberlist's side, which
// may call it before startClusterNode has set the sharing up).
func (n *clusterNode) observe(r gossip.Report) {
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

// joinGrace is how long a node that has not joined yet counts the nodes of
// its join list: past it, a node whose seeds are all down (the first of a
// fleet to start) limits as the cluster it is.
const joinGrace = 10 * time.Second

// sync sends this node's report every interval, and keeps the cluster size
// the shares are computed for up to date.
func (n *clusterNode) sync() {
	defer close(n.done)
	t := time.NewTicker(n.cluster.SyncInterval())
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			size := clusterSize(n.cluster.Members(), now)
			if size > 1 {
				n.joined = true
			} else if !n.joined && now.Sub(n.started) < joinGrace {
				size = n.expected
			}
			n.sharing.SetClusterSize(size)
			r := n.sharing.Tick(now)
			if err := n.cluster.Broadcast(&r); err != nil {
				n.logger.Debug("sending report", zap.Error(err))
			}
		}
	}
}

// clusterSize is the number of nodes that share the limits at now: the
// members alive, and those declared dead within deadMemory (a dead node
// may be on the other side of a partition: counting it lets on_partition
// see the minority), but not those that left.
func clusterSize(members []gossip.Member, now time.Time) int {
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
func (n *clusterNode) close() {
	close(n.stop)
	<-n.done
	if err := n.cluster.Close(); err != nil {
		n.logger.Warn("leaving the cluster", zap.Error(err))
	}
	n.logger.Info("cluster node stopped", zap.String("node", n.cluster.Name()))
}

// resetLocal forgets a key that another node's admin API reset.
func resetLocal(rule, key string) {
	if e, ok := registry.get(rule); ok {
		e.lim.Delete(key)
		forgetInFlight(e, key)
		e.stats.forget(key)
	}
}

// clusters holds the cluster node of each bind address, process-wide, in
// a caddy.UsagePool keyed by the address: a reload provisions its config
// while the running one still serves, and both must use the same node,
// which cannot bind twice. The pool's value is the address's slot, whose
// node changes when a config with other cluster settings acquires it: the
// running node stops first (the running config then goes on without
// gossip until it stops). The last release of the address stops its node.
var clusters = clusterPool{caddy.NewUsagePool()}

// clusterPool is the type of clusters.
type clusterPool struct{ pool *caddy.UsagePool }

// bindSlot is the node that holds a bind address.
type bindSlot struct {
	mu   sync.Mutex
	node *clusterNode // nil until started
}

// Destruct stops the address's node, when the last config using it is
// gone.
func (b *bindSlot) Destruct() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != nil {
		b.node.close()
	}
	return nil
}

// errNoNode is what existing's constructor returns: it looks up, and
// never starts a node.
var errNoNode = errors.New("no cluster node runs on this address")

// existing returns the running node of s, with one more use of its
// address, if its settings are s; else nil. It binds nothing, so
// Provision (and caddy validate) may call it.
func (p clusterPool) existing(s clusterSettings) *clusterNode {
	v, _, err := p.pool.LoadOrNew(s.gossip.Bind, func() (caddy.Destructor, error) { return nil, errNoNode })
	if err != nil {
		return nil
	}
	slot := v.(*bindSlot)
	slot.mu.Lock()
	n := slot.node
	slot.mu.Unlock()
	if n == nil || n.print != s.print {
		_, _ = p.pool.Delete(s.gossip.Bind)
		return nil
	}
	return n
}

// acquire returns the node for s, with one more use of its address: the
// running one if its settings are s, else a new one, which first stops a
// node of other settings on the same address.
func (p clusterPool) acquire(s clusterSettings, logger *zap.Logger) (*clusterNode, error) {
	v, _, _ := p.pool.LoadOrNew(s.gossip.Bind, func() (caddy.Destructor, error) { return new(bindSlot), nil })
	slot := v.(*bindSlot)
	n, err := slot.start(s, logger)
	if err != nil {
		_, _ = p.pool.Delete(s.gossip.Bind)
		return nil, err
	}
	return n, nil
}

// start returns the slot's node if its settings are s, else stops it and
// starts a node of s.
func (b *bindSlot) start(s clusterSettings, logger *zap.Logger) (*clusterNode, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != nil && b.node.print == s.print {
		return b.node, nil
	}
	if b.node != nil {
		b.node.close()
		b.node = nil
	}
	n, err := startClusterNode(s, logger)
	if err != nil {
		return nil, err
	}
	b.node = n
	return n, nil
}

// release drops one use of n's address, and stops its node with the last.
func (p clusterPool) release(n *clusterNode) { _, _ = p.pool.Delete(n.bind) }

// clusterUse is an app's cluster: its settings and the node it uses.
type clusterUse struct {
	settings clusterSettings
	node     atomic.Pointer[clusterNode] // set at Provision if one runs, else at Start
}

// provisionCluster checks cfg and, on a reload that keeps the cluster
// block, takes the running node at once (it serves the new handlers from
// their first request). It starts none: caddy validate binds no port.
func provisionCluster(cfg *ClusterConfig) (*clusterUse, error) {
	settings, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	u := &clusterUse{settings: settings}
	if n := clusters.existing(settings); n != nil {
		u.node.Store(n)
	}
	return u, nil
}

// start starts the node if Provision found none running, and gives it the
// rules.
func (u *clusterUse) start(logger *zap.Logger, rules []gossip.Rule) error {
	if u.node.Load() != nil {
		return nil
	}
	n, err := clusters.acquire(u.settings, logger)
	if err != nil {
		return err
	}
	u.node.Store(n)
	n.sharing.SetRules(rules)
	return nil
}

// cleanup releases the node.
func (u *clusterUse) cleanup() {
	if n := u.node.Swap(nil); n != nil {
		clusters.release(n)
	}
}

// sharing is the quota sharing of the cluster node in use, or nil: no
// cluster, or its node not started yet (the rules then limit alone).
func (a *App) sharing() *gossip.Sharing {
	if n := a.clusterNode(); n != nil {
		return n.sharing
	}
	return nil
}

// clusterNode is the cluster node in use, or nil.
func (a *App) clusterNode() *clusterNode {
	if a.cluster == nil {
		return nil
	}
	return a.cluster.node.Load()
}

// sharedRules are this config's rules with scope cluster, for the sharing.
func (a *App) sharedRules() []gossip.Rule {
	var out []gossip.Rule
	for _, p := range a.pending {
		if !p.rule.clustered {
			continue
		}
		if c, ok := concurrentRule(p.name); ok && p.rule.MaxConcurrent > 0 {
			out = append(out, c)
		}
		if p.rule.concurrentOnly() {
			continue
		}
		lim := p.lim
		r := gossip.Rule{
			Name:   p.name,
			Window: time.Duration(p.rule.Limits[0].Window),
			Demand: func(key string) uint64 {
				d, _ := lim.TakeDemand(key)
				return d
			},
		}
		switch limiter.Algorithm(p.rule.Algorithm) {
		case limiter.TokenBucket, limiter.LeakyBucket:
		default: // a window: its count does not move with a share
			r.Used = func(key string, now time.Time) uint64 { return uint64(max(lim.UsedAt(key, now), 0)) }
		}
		out = append(out, r)
	}
	return out
}

// memberlistLog writes memberlist's log lines ("[DEBUG] memberlist: …")
// to a zap logger at their level: its debug lines (every stream
// connection, every push/pull) stay out of an info log.
type memberlistLog struct{ logger *zap.Logger }

// memberlistLevels are memberlist's level prefixes.
var memberlistLevels = map[string]zapcore.Level{
	"[DEBUG] ": zapcore.DebugLevel, "[INFO] ": zapcore.InfoLevel,
	"[WARN] ": zapcore.WarnLevel, "[ERR] ": zapcore.ErrorLevel,
}

func (m memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, msg := zapcore.InfoLevel, line
	for prefix, l := range memberlistLevels {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			level, msg = l, strings.TrimPrefix(rest, "memberlist: ")
			break
		}
	}
	if ce := m.logger.Check(level, msg); ce != nil {
		ce.Write()
	}
	return len(p), nil
}

// parseSecretKey decodes the i-th (from 0) key of secret_key: base64 of
// 16, 24 or 32 bytes. Errors do not quote the key.
func parseSecretKey(i int, key string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("cluster secret_key %d: not base64 (generate a key with: head -c 32 /dev/urandom | base64)", i+1)
	}
	if n := len(raw); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("cluster secret_key %d: %d bytes, want 16, 24 or 32 (generate a key with: head -c 32 /dev/urandom | base64)", i+1, n)
	}
	return raw, nil
}
