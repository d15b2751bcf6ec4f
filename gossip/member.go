package gossip

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member states, as Members reports them.
const (
	StateAlive = "alive" // alive or suspect: memberlist v0.7.0 does not expose suspicion
	StateLeft  = "left"  // left on purpose (Close)
	StateDead  = "dead"  // declared dead by failure detection
)

// Member is one node of the cluster as this node sees it.
type Member struct {
	Name  string
	Addr  string // host:port
	State string // StateAlive, StateLeft or StateDead
	Self  bool
	Since time.Time // when it left or died; zero for alive members
}

// Stats counts what a Cluster sent and received.
type Stats struct {
	MessagesSent     uint64 // user messages sent (one per report part per member, resets, leaves)
	BytesSent        uint64 // their payload bytes, before memberlist's framing
	SendErrors       uint64
	MessagesReceived uint64
	BytesReceived    uint64
	ReportsReceived  uint64 // report parts handed to onReport
	ResetsReceived   uint64 // resets handed to onReset
	// OverridesReceived counts override changes handed to Config.OnOverride.
	OverridesReceived uint64
	// Dropped counts packets, streams and messages received and dropped,
	// by reason: memberlist's "label" (not the cluster's label),
	// "decrypt" (not sent with a key of the cluster), "decode" and
	// "empty" (a stream that ended before its first byte);
	// "stream_oversized", "stream_excess" and "stream_timeout" (a stream
	// over MaxStreamBytes, past MaxInboundStreams at once, or slower
	// than StreamReadTimeout, see streamcap.go); the
	// decoding reasons of Reason ("version", "type", "truncated",
	// "too_large", "trailing"), memberlist's too; "overflow" when
	// memberlist's queue or the callbacks fall behind; "other".
	Dropped      map[string]uint64
	JoinAttempts uint64
	JoinFailures uint64
}

const (
	leaveTimeout  = time.Second // how long Close waits for its leave to spread
	packetDefault = 1400
)

// Cluster is this node's membership in a cluster of nodes, over
// memberlist. Its methods are safe for concurrent use.
type Cluster struct {
	ml       *memberlist.Memberlist
	name     string
	maxMsg   int
	interval time.Duration
	rejoin   time.Duration
	logger   *log.Logger
	droplog  *dropLog // memberlist's logger writes here

	onReport func(Report)
	onReset  func(rule, key string)
	inbox    chan inbound

	onOverride func(OverrideChange) // Config.OnOverride

	// memberlist's Members and LocalNode return nodes that it keeps
	// rewriting (on every alive message) without our being able to take
	// its lock: reading them races. Its event delegate is called with that
	// lock held, so copies taken there are safe: alive holds them.
	mu    sync.Mutex
	alive map[string]memberlist.Node // by name, this node too
	gone  map[string]Member          // dead or left, by name
	left  map[string]time.Time       // leave messages received, by sender

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	sent, sentBytes, sendErrors              atomic.Uint64
	recv, recvBytes, reportsRecv, resetsRecv atomic.Uint64
	overridesRecv                            atomic.Uint64
	dropped                                  [len(dropReasons)]atomic.Uint64
	joinAttempts, joinFailures               atomic.Uint64
}

// New starts a cluster node: it binds, starts memberlist and, if
// cfg.Join names seeds, joins them in the background. onReport receives
// every report part from other nodes and onReset every reset, with the
// rule's name and the key as the sender's BroadcastReset got them; they
// are called one at a time from one goroutine, never from memberlist's,
// and should return quickly (while they are busy, up to 1024 messages
// wait, then messages are dropped as "overflow"). Either may be nil.
func New(cfg Config, onReport func(Report), onReset func(rule, key string)) (*Cluster, error) {
	if cfg.Bind == "" {
		cfg.Bind = DefaultBind
	}
	if cfg.Label == "" {
		cfg.Label = "edgelimit"
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.Rejoin <= 0 {
		cfg.Rejoin = 2 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	host, port, err := splitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind %q: %w", cfg.Bind, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if err := CheckBind(net.JoinHostPort(host, strconv.Itoa(port)), len(cfg.SecretKeys)); err != nil {
		return nil, fmt.Errorf("gossip: bind %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	var keyring *memberlist.Keyring
	if len(cfg.SecretKeys) > 0 {
		keyring, err = memberlist.NewKeyring(cfg.SecretKeys, cfg.SecretKeys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip: secret keys: %w", err)
		}
	}
	if len(cfg.Label) > memberlist.LabelMaxSize {
		return nil, fmt.Errorf("gossip: label of %d bytes, the most is %d", len(cfg.Label), memberlist.LabelMaxSize)
	}

	c := &Cluster{
		interval:   cfg.SyncInterval,
		rejoin:     cfg.Rejoin,
		logger:     logger,
		onReport:   onReport,
		onReset:    onReset,
		onOverride: cfg.OnOverride,
		inbox:      make(chan inbound, inboxSize),
		alive:      make(map[string]memberlist.Node),
		gone:       make(map[string]Member),
		left:       make(map[string]time.Time),
		done:       make(chan struct{}),
	}
	// memberlist and its transport log what they drop: count it, and
	// sample the lines (see droplog.go).
	c.droplog = newDropLog(logger, c.drop)
	mlLogger := log.New(c.droplog, "", 0)

	nt, err := newNetTransport(host, port, mlLogger)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind %q: %w", cfg.Bind, err)
	}
	port = nt.GetAutoBindPort()
	if cfg.NodeName == "" {
		hn, _ := os.Hostname()
		cfg.NodeName = net.JoinHostPort(hn, strconv.Itoa(port))
	}
	if len(cfg.NodeName) > MaxNodeName {
		_ = nt.Shutdown()
		return nil, fmt.Errorf("gossip: node name of %d bytes, the most is %d", len(cfg.NodeName), MaxNodeName)
	}
	c.name = cfg.NodeName

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	if cfg.Advertise != "" {
		ah, ap, err := splitHostPort(cfg.Advertise)
		if err != nil {
			_ = nt.Shutdown()
			return nil, fmt.Errorf("gossip: advertise %q: %w", cfg.Advertise, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	mc.Label = cfg.Label
	mc.Keyring = keyring
	// Reports are hashes, which do not compress; compression would only
	// cost CPU and make the packet budget uncertain.
	mc.EnableCompression = false
	mc.Delegate = delegate{c}
	mc.Events = events{c}
	mc.Logger = mlLogger
	watch := newStreamWatch(nt, defaultStreamLimits, streamHooks{empty: c.droplog.emptyStream, dropped: c.streamDropped})
	var tr memberlist.NodeAwareTransport = watch
	if cfg.WrapTransport != nil {
		tr = cfg.WrapTransport(tr)
	}
	mc.Transport = tr
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	c.maxMsg = MaxMessageBytes(mc.UDPBufferSize, mc.Label, mc.Keyring != nil)

	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = watch.Shutdown()
		return nil, fmt.Errorf("gossip: bind %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	c.ml = ml

	c.wg.Add(1)
	go c.dispatch()
	c.wg.Add(1)
	go c.joinLoop(slices.Clone(cfg.Join))
	return c, nil
}

func newNetTransport(host string, port int, logger *log.Logger) (*memberlist.NetTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger}
	tries := 1
	if port == 0 {
		tries = 10 // the free TCP port may be taken for UDP: try another
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			return nt, nil
		}
	}
	return nil, err
}

// Name returns this node's name.
func (c *Cluster) Name() string { return c.name }

// Addr returns the host:port this node advertises to the others.
func (c *Cluster) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.alive[c.name]
	return n.Address()
}

// MaxMessageBytes returns the largest message Broadcast sends in one
// packet.
func (c *Cluster) MaxMessageBytes() int { return c.maxMsg }

// SyncInterval returns the configured sync interval.
func (c *Cluster) SyncInterval() time.Duration { return c.interval }

// others returns the live members other than this node.
func (c *Cluster) others() []*memberlist.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*memberlist.Node, 0, len(c.alive))
	for name, n := range c.alive {
		if name != c.name {
			out = append(out, &n)
		}
	}
	return out
}

// Broadcast sends r to every other live member, best effort: split into
// parts that each fit in one packet (see SplitReport), each sent as one
// UDP packet to each member, with no retry. Reports are periodic and each
// supersedes the last, so a lost one is replaced within a sync interval:
// reliable delivery or gossip relaying would only add latency and load.
// It returns an error if r cannot be encoded, or the last send error
// (the other members were still sent to).
func (c *Cluster) Broadcast(r *Report) error {
	if err := CheckReport(r); err != nil {
		return err
	}
	parts := SplitReport(r, c.maxMsg)
	if parts == nil {
		return fmt.Errorf("gossip: node name %q too long for a %d-byte message", r.Node, c.maxMsg)
	}
	msgs := make([][]byte, len(parts))
	for i := range parts {
		msgs[i] = AppendReport(nil, &parts[i])
	}
	var last error
	for _, n := range c.others() {
		for _, m := range msgs {
			if err := c.ml.SendBestEffort(n, m); err != nil {
				c.sendErrors.Add(1)
				last = fmt.Errorf("gossip: send report to %s: %w", n.Name, err)
				continue
			}
			c.sent.Add(1)
			c.sentBytes.Add(uint64(len(m)))
		}
	}
	return last
}

// BroadcastReset tells every other live member to forget key of the rule
// named rule (it does not call this node's onReset). The strings travel
// as they are, not hashed: rule may be at most MaxRuleBytes bytes and key
// MaxKeyBytes, or BroadcastReset returns an error and sends nothing.
// Resets are rare and must not be lost, so each is sent over TCP
// (memberlist SendReliable) to all members at once; BroadcastReset waits
// for all of them, at most memberlist's TCPTimeout (10 s by default), and
// returns the errors of those it could not reach. A member that joins
// later or is partitioned away does not get the reset.
func (c *Cluster) BroadcastReset(rule, key string) error {
	msg, err := AppendReset(nil, Reset{Rule: rule, Key: key})
	if err != nil {
		return err
	}
	return c.sendReliable(msg, "reset")
}

// Members returns the live members (this node too), then those that left
// or died recently, sorted by name within each group. Suspect members are
// reported alive: memberlist does not expose suspicion.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	out := make([]Member, 0, len(c.alive))
	for _, n := range c.alive {
		out = append(out, Member{Name: n.Name, Addr: n.Address(), State: StateAlive, Self: n.Name == c.name})
	}
	gone := make([]Member, 0, len(c.gone))
	for _, m := range c.gone {
		gone = append(gone, m)
	}
	c.mu.Unlock()
	byName := func(a, b Member) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(out, byName)
	slices.SortFunc(gone, byName)
	return append(out, gone...)
}

// Stats returns the counters so far.
func (c *Cluster) Stats() Stats {
	s := Stats{
		MessagesSent:      c.sent.Load(),
		BytesSent:         c.sentBytes.Load(),
		SendErrors:        c.sendErrors.Load(),
		MessagesReceived:  c.recv.Load(),
		BytesReceived:     c.recvBytes.Load(),
		ReportsReceived:   c.reportsRecv.Load(),
		ResetsReceived:    c.resetsRecv.Load(),
		OverridesReceived: c.overridesRecv.Load(),
		Dropped:           make(map[string]uint64, len(dropReasons)),
		JoinAttempts:      c.joinAttempts.Load(),
		JoinFailures:      c.joinFailures.Load(),
	}
	for i, r := range dropReasons {
		s.Dropped[r] = c.dropped[i].Load()
	}
	return s
}

// kill shuts down without leaving, as a crash would (for tests).
func (c *Cluster) kill() error {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(false) })
	return c.closeErr
}

// Close tells the others this node is leaving, waits a short time for
// that to spread, and shuts down. Later calls return the first's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.shutdown(true) })
	return c.closeErr
}

func (c *Cluster) shutdown(leave bool) error {
	close(c.done)
	var errs []error
	if leave {
		msg := AppendLeave(nil, c.name)
		for _, n := range c.others() {
			if c.ml.SendBestEffort(n, msg) == nil {
				c.sent.Add(1)
				c.sentBytes.Add(uint64(len(msg)))
			}
		}
		if err := c.ml.Leave(leaveTimeout); err != nil {
			errs = append(errs, fmt.Errorf("gossip: leave: %w", err))
		}
	}
	if err := c.ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("gossip: shutdown: %w", err))
	}
	c.wg.Wait()
	return errors.Join(errs...)
}
