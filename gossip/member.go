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

// Config configures a Cluster. The zero value of each field means its
// default.
type Config struct {
	// NodeName names this node in the cluster, unique, at most 255 bytes.
	// Default: hostname:port (the bound port).
	NodeName string
	// Bind is the host:port to listen on, UDP and TCP. Default
	// 0.0.0.0:7946. Port 0 picks a free port (see Cluster.Addr).
	Bind string
	// Advertise is the host:port other nodes reach this one at, if not the
	// bound one (NAT, containers). Optional.
	Advertise string
	// Join lists seed nodes (host:port). New joins them in the
	// background, retrying with backoff until it is in a cluster of more
	// than itself: New never blocks on them, and a seed list may name this
	// node too.
	Join []string
	// SecretKeys are AES keys of 16, 24 or 32 bytes: the first encrypts,
	// all decrypt (for key rotation). Required unless Bind is a loopback
	// address.
	SecretKeys [][]byte
	// Label is memberlist's cluster label: packets and streams with
	// another label are dropped, and it is authenticated with the key.
	// Default "edgelimit".
	Label string
	// SyncInterval is how often the caller broadcasts reports; it sets
	// how soon the background join first retries. Default 100ms.
	SyncInterval time.Duration
	// Rejoin is how often, once joined, this node tries to reconnect to
	// members declared dead, and to the seeds, while any member is dead:
	// memberlist alone never merges two sides of a partition that lasted
	// longer than its GossipToTheDeadTime (30 s). Default 2s: a long
	// partition heals within about that once the network does.
	Rejoin time.Duration
	// Logger receives memberlist's logs, which are chatty. Default:
	// discarded.
	Logger *log.Logger

	// Tune, if set, may change memberlist's configuration last, after New
	// has filled it in (tests use it to make failure detection fast).
	Tune func(*memberlist.Config)
	// WrapTransport, if set, wraps the network transport (tests use it to
	// inject faults, see FaultTransport).
	WrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}

// DefaultBind is where a Cluster listens unless told otherwise.
const DefaultBind = "0.0.0.0:7946"

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
	// Dropped counts received messages dropped, by reason: the decoding
	// reasons of Reason ("version", "type", "truncated", "too_large",
	// "trailing") and "overflow" when the callbacks fall behind.
	Dropped      map[string]uint64
	JoinAttempts uint64
	JoinFailures uint64
}

var dropReasons = [...]string{"version", "type", "truncated", "too_large", "trailing", "overflow", "other"}

const (
	inboxSize     = 1024             // decoded messages waiting for the callbacks
	leaveTimeout  = time.Second      // how long Close waits for its leave to spread
	maxJoinWait   = 10 * time.Second // the longest pause between join attempts
	maxGone       = 256              // departed members remembered for Members
	leftMemory    = time.Minute      // how long a leave message marks its sender as left
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

	onReport func(Report)
	onReset  func(rule, key string)
	inbox    chan inbound

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
	dropped                                  [len(dropReasons)]atomic.Uint64
	joinAttempts, joinFailures               atomic.Uint64
}

// inbound is a decoded message waiting for dispatch: a report part if
// report is set, else a reset.
type inbound struct {
	report *Report
	reset  Reset
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
		cfg.SyncInterval = 100 * time.Millisecond
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
	if len(cfg.SecretKeys) == 0 && !isLoopback(host) {
		return nil, fmt.Errorf("gossip: a secret key is required to bind %s, which is not a loopback address: cluster traffic would be unauthenticated and in clear", host)
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

	nt, err := newNetTransport(host, port, logger)
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

	c := &Cluster{
		name:     cfg.NodeName,
		interval: cfg.SyncInterval,
		rejoin:   cfg.Rejoin,
		logger:   logger,
		onReport: onReport,
		onReset:  onReset,
		inbox:    make(chan inbound, inboxSize),
		alive:    make(map[string]memberlist.Node),
		gone:     make(map[string]Member),
		left:     make(map[string]time.Time),
		done:     make(chan struct{}),
	}

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
	mc.Logger = logger
	var tr memberlist.NodeAwareTransport = nt
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
		_ = nt.Shutdown()
		return nil, fmt.Errorf("gossip: %w", err)
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

func splitHostPort(hp string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return host, port, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// Join joins the cluster through the given seeds now, and returns how
// many it reached.
func (c *Cluster) Join(seeds ...string) (int, error) {
	c.joinAttempts.Add(1)
	n, err := c.ml.Join(seeds)
	if n == 0 {
		c.joinFailures.Add(1)
	}
	return n, err
}

// joinLoop joins the seeds, retrying with backoff until this node is in
// a cluster of more than itself; then, every rejoin interval while some
// member is dead, it tries to reconnect to the dead members and the seeds,
// so that the two sides of a long partition merge again once it heals.
func (c *Cluster) joinLoop(seeds []string) {
	defer c.wg.Done()
	wait := max(c.interval, 100*time.Millisecond)
	joined := len(seeds) == 0
	for {
		if !joined {
			n, err := c.Join(seeds...)
			if n > 0 && c.ml.NumMembers() > 1 {
				joined = true
			} else if err != nil {
				c.logger.Printf("[WARN] gossip: join %v: %v; retrying in %v", seeds, err, wait)
			}
		} else if dead := c.deadAddrs(); len(dead) > 0 {
			if _, err := c.Join(append(dead, seeds...)...); err != nil {
				c.logger.Printf("[DEBUG] gossip: rejoin %v: %v", dead, err)
			}
		}
		next := c.rejoin
		if !joined {
			next = wait
			wait = min(2*wait, maxJoinWait)
		}
		t := time.NewTimer(next)
		select {
		case <-c.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// deadAddrs returns the addresses of the members declared dead.
func (c *Cluster) deadAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.gone {
		if m.State == StateDead {
			out = append(out, m.Addr)
		}
	}
	return out
}

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
	nodes := c.others()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			if err := c.ml.SendReliable(n, msg); err != nil {
				c.sendErrors.Add(1)
				errs[i] = fmt.Errorf("gossip: send reset to %s: %w", n.Name, err)
				return
			}
			c.sent.Add(1)
			c.sentBytes.Add(uint64(len(msg)))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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
		MessagesSent:     c.sent.Load(),
		BytesSent:        c.sentBytes.Load(),
		SendErrors:       c.sendErrors.Load(),
		MessagesReceived: c.recv.Load(),
		BytesReceived:    c.recvBytes.Load(),
		ReportsReceived:  c.reportsRecv.Load(),
		ResetsReceived:   c.resetsRecv.Load(),
		Dropped:          make(map[string]uint64, len(dropReasons)),
		JoinAttempts:     c.joinAttempts.Load(),
		JoinFailures:     c.joinFailures.Load(),
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

func (c *Cluster) drop(reason string) {
	i := slices.Index(dropReasons[:], reason)
	if i < 0 {
		i = len(dropReasons) - 1
	}
	c.dropped[i].Add(1)
}

// receive handles a user message from memberlist's goroutine: it decodes
// it (copying out of b, which memberlist may reuse) and queues it for
// dispatch, never blocking.
func (c *Cluster) receive(b []byte) {
	c.recv.Add(1)
	c.recvBytes.Add(uint64(len(b)))
	t, err := PeekType(b)
	if err != nil {
		c.drop(Reason(err))
		return
	}
	var in inbound
	switch t {
	case MsgReport:
		r, err := DecodeReport(b)
		if err != nil {
			c.drop(Reason(err))
			return
		}
		in.report = &r
	case MsgReset:
		if in.reset, err = DecodeReset(b); err != nil {
			c.drop(Reason(err))
			return
		}
	case MsgLeave:
		name, err := DecodeLeave(b)
		if err != nil {
			c.drop(Reason(err))
			return
		}
		c.noteLeave(name)
		return
	}
	select {
	case c.inbox <- in:
	default:
		c.drop("overflow")
	}
}

func (c *Cluster) dispatch() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case in := <-c.inbox:
			if in.report != nil {
				c.reportsRecv.Add(1)
				if c.onReport != nil {
					c.onReport(*in.report)
				}
			} else {
				c.resetsRecv.Add(1)
				if c.onReset != nil {
					c.onReset(in.reset.Rule, in.reset.Key)
				}
			}
		}
	}
}

// noteLeave records a leave message from name, which may come before or
// after memberlist reports the node gone.
func (c *Cluster) noteLeave(name string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.gone[name]; ok {
		m.State = StateLeft
		c.gone[name] = m
		return
	}
	for n, t := range c.left {
		if now.Sub(t) > leftMemory {
			delete(c.left, n)
		}
	}
	if len(c.left) < maxGone {
		c.left[name] = now
	}
}

// delegate receives memberlist's user messages.
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(int) []byte                 { return nil }
func (d delegate) NotifyMsg(b []byte)                  { d.c.receive(b) }
func (d delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d delegate) LocalState(bool) []byte              { return nil }
func (d delegate) MergeRemoteState(buf []byte, _ bool) {}

// events follows members coming and going. memberlist calls it with its
// node lock held: it only updates maps.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.c.mu.Lock()
	delete(e.c.gone, n.Name)
	e.c.alive[n.Name] = *n
	e.c.mu.Unlock()
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	e.c.mu.Lock()
	e.c.alive[n.Name] = *n
	e.c.mu.Unlock()
}

func (e events) NotifyLeave(n *memberlist.Node) {
	c := e.c
	now := time.Now()
	m := Member{Name: n.Name, Addr: n.Address(), State: StateDead, Since: now}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.alive, n.Name)
	if t, ok := c.left[n.Name]; ok {
		delete(c.left, n.Name)
		if now.Sub(t) <= leftMemory {
			m.State = StateLeft
		}
	}
	if _, ok := c.gone[n.Name]; !ok && len(c.gone) >= maxGone {
		var oldest string
		for name, g := range c.gone {
			if oldest == "" || g.Since.Before(c.gone[oldest].Since) {
				oldest = name
			}
		}
		delete(c.gone, oldest)
	}
	c.gone[n.Name] = m
}
