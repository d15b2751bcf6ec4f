package gossip

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// FaultTransport wraps a memberlist transport (normally the NetTransport
// that New makes; hook it in with Config.WrapTransport) and injects faults
// into what the node sends, controlled at run time: it drops a fraction of
// packets, delays packets, and refuses packets and connections to blocked
// addresses. It is meant for tests.
//
// Faults apply to outgoing traffic only (incoming streams come from
// ephemeral ports, so their sender cannot be told by address): to cut two
// groups of nodes apart, block each side on the other, as Partition does.
// A blocked or dropped packet is reported to memberlist as sent, as a lost
// UDP packet would be; a blocked dial fails.
type FaultTransport struct {
	memberlist.NodeAwareTransport

	mu      sync.Mutex
	drop    float64
	delay   time.Duration
	replay  time.Duration
	blocked map[string]bool

	maxPacket atomic.Int64
	dropped   atomic.Uint64
}

var _ memberlist.NodeAwareTransport = (*FaultTransport)(nil)

// NewFaultTransport returns a FaultTransport around inner that injects no
// faults yet.
func NewFaultTransport(inner memberlist.NodeAwareTransport) *FaultTransport {
	return &FaultTransport{NodeAwareTransport: inner, blocked: make(map[string]bool)}
}

// SetDrop makes the transport drop each outgoing packet with probability p.
func (t *FaultTransport) SetDrop(p float64) {
	t.mu.Lock()
	t.drop = p
	t.mu.Unlock()
}

// SetDelay delays each outgoing packet by d (0: send at once).
func (t *FaultTransport) SetDelay(d time.Duration) {
	t.mu.Lock()
	t.delay = d
	t.mu.Unlock()
}

// SetReplay sends each outgoing packet again d after it was sent (0: no
// replays), as someone who captured the traffic could: memberlist's
// encryption authenticates a packet, but does not stop its being sent
// twice.
func (t *FaultTransport) SetReplay(d time.Duration) {
	t.mu.Lock()
	t.replay = d
	t.mu.Unlock()
}

// Block stops all traffic to the given host:port addresses.
func (t *FaultTransport) Block(addrs ...string) {
	t.mu.Lock()
	for _, a := range addrs {
		t.blocked[a] = true
	}
	t.mu.Unlock()
}

// Heal removes all blocks, drops and delays.
func (t *FaultTransport) Heal() {
	t.mu.Lock()
	clear(t.blocked)
	t.drop, t.delay = 0, 0
	t.mu.Unlock()
}

// MaxPacket returns the size of the largest packet sent so far, as
// handed to the wrapped transport (so with memberlist's framing,
// encryption and label).
func (t *FaultTransport) MaxPacket() int { return int(t.maxPacket.Load()) }

// Dropped returns how many packets were dropped or blocked.
func (t *FaultTransport) Dropped() uint64 { return t.dropped.Load() }

// Partition cuts the nodes at addresses a, sending through ta, from the
// nodes at addresses b, sending through tb, both ways.
func Partition(ta []*FaultTransport, a []string, tb []*FaultTransport, b []string) {
	for _, t := range ta {
		t.Block(b...)
	}
	for _, t := range tb {
		t.Block(a...)
	}
}

// faults returns what to do with a packet or dial to addr.
func (t *FaultTransport) faults(addr string) (blocked bool, drop bool, delay, replay time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blocked[addr] {
		return true, false, 0, 0
	}
	return false, t.drop > 0 && rand.Float64() < t.drop, t.delay, t.replay
}

// WriteTo implements memberlist.Transport.
func (t *FaultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *FaultTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	for n := int64(len(b)); ; {
		m := t.maxPacket.Load()
		if n <= m || t.maxPacket.CompareAndSwap(m, n) {
			break
		}
	}
	blocked, drop, delay, replay := t.faults(a.Addr)
	if blocked || drop {
		t.dropped.Add(1)
		return time.Now(), nil
	}
	if replay > 0 {
		cp := append([]byte(nil), b...)
		time.AfterFunc(delay+replay, func() { _, _ = t.NodeAwareTransport.WriteToAddress(cp, a) })
	}
	if delay > 0 {
		cp := append([]byte(nil), b...)
		time.AfterFunc(delay, func() { _, _ = t.NodeAwareTransport.WriteToAddress(cp, a) })
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

var errPartitioned = errors.New("gossip: fault transport: address blocked")

// DialTimeout implements memberlist.Transport.
func (t *FaultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *FaultTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if blocked, _, _, _ := t.faults(a.Addr); blocked {
		t.dropped.Add(1)
		return nil, errPartitioned
	}
	return t.NodeAwareTransport.DialAddressTimeout(a, timeout)
}
