package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// memberlist reads a stream it receives before it can tell whether its
// sender holds the key: an encrypted message's length, then (io.CopyN
// into a growing buffer) as many bytes as that claims, up to 20 MiB,
// before it tries to decrypt; and it serves every stream at once, each
// for up to its TCPTimeout (10 s). Thirty connections that claim 20 MiB
// and send it took a node from 58 MiB to 931 MiB of memory, without a
// key. So streamWatch hands memberlist each stream it receives in an
// inboundConn, which bounds what the stream may make memberlist read,
// and for how long, and refuses streams past a number at once.
//
// memberlist reads one message from a stream it receives (a push/pull of
// the member list, a user message, a ping), then at most writes a reply
// and closes it: the bounds hold for the stream's whole read side.

// Stream limits. The largest stream a member sends is a push/pull of the
// member list: this package's LocalState is empty (reports and blocks
// travel in UDP packets, a reset of at most MaxRuleBytes+MaxKeyBytes in
// a stream of its own), so the size of a push/pull grows with the
// members, not with max_keys: memberlist's state of each, 319 bytes with
// a name of MaxNodeName bytes and an IPv4 address (12 more for IPv6), and
// 74 bytes more (TestStreamBudgetFitsPushPull measures it).
const (
	// MaxStreamMembers is the largest cluster whose push/pull
	// MaxStreamBytes holds twice over, at pushStateBytes a member.
	MaxStreamMembers = 256
	// pushStateBytes bounds memberlist's state of one member in a
	// push/pull (measured: 319 bytes, 331 with an IPv6 address).
	pushStateBytes = 384
	// MaxStreamBytes is the most one received stream may send, its
	// label and framing included: a stream that claims more (an
	// encrypted message's length) or sends more is dropped as
	// "stream_oversized". 256 KiB: a push/pull of MaxStreamMembers
	// members takes at most 98,378 bytes (81,738 measured).
	MaxStreamBytes = 256 << 10
	// MaxInboundStreams is how many received streams memberlist
	// handles at once; one more is closed as it arrives
	// ("stream_excess"). Each holds at most MaxStreamBytes twice
	// (memberlist's buffer, which doubles as it grows, then the
	// plaintext): 32 hold at most 16 MiB. memberlist itself refuses
	// push/pulls past 128 at once.
	MaxInboundStreams = 32
	// StreamReadTimeout is how long a received stream has to send its
	// message: memberlist's own deadline is its TCPTimeout (10 s). A
	// stream still sending after it is dropped as "stream_timeout".
	// MaxStreamBytes in it is 52 KB/s.
	StreamReadTimeout = 5 * time.Second
)

// streamLimits are the bounds a streamWatch keeps (TestInboundConn makes
// them small).
type streamLimits struct {
	maxBytes    int64
	maxStreams  int
	readTimeout time.Duration
}

var defaultStreamLimits = streamLimits{maxBytes: MaxStreamBytes, maxStreams: MaxInboundStreams, readTimeout: StreamReadTimeout}

// Drop reasons of streams.
const (
	dropOversized = "stream_oversized"
	dropExcess    = "stream_excess"
	dropTimeout   = "stream_timeout"
)

// streamDropped is a stream the stream limits dropped, and the error an
// inboundConn's Read returns once it has. memberlist writes it in its log
// line of the failed read, and so does this package's own line of the
// drop: droplog.go passes such lines on sampled and uncounted, as the
// drop is counted already.
type streamDropped struct {
	reason string
	detail string
}

// streamDroppedText starts the text of every streamDropped error.
const streamDroppedText = "gossip: stream dropped"

func (e *streamDropped) Error() string {
	return fmt.Sprintf("%s (%s): %s", streamDroppedText, e.reason, e.detail)
}

// streamHooks are what an inboundConn tells of its stream: empty is
// called with the sender's address when the first read finds it over,
// dropped when it drops the stream.
type streamHooks struct {
	empty   func(addr string)
	dropped func(e *streamDropped, addr string)
}

// inboundConn is a received stream as memberlist reads it, from one
// goroutine. Its reads stop at limits.maxBytes (and at once when an
// encrypted message claims more), its read deadline is at most
// readTimeout after it arrived, whatever memberlist sets, and closing it
// frees its place among the streams at once (release).
type inboundConn struct {
	net.Conn
	hooks   streamHooks
	limits  streamLimits
	readBy  time.Time // the read deadline it has: readTimeout after it arrived
	release func()    // frees its place; called once

	read    int64
	seen    bool   // a read was made
	head    []byte // its first bytes, until claimOf has decided
	decided bool
	closed  sync.Once
	err     error // once dropped
}

func newInboundConn(c net.Conn, l streamLimits, hooks streamHooks, release func()) *inboundConn {
	ic := &inboundConn{Conn: c, hooks: hooks, limits: l, readBy: time.Now().Add(l.readTimeout), release: release}
	_ = c.SetReadDeadline(ic.readBy)
	return ic
}

// headMax is the most claimOf needs: a label header (2 bytes and a label
// of at most 255), the message type and an encrypted message's length.
const headMax = 2 + 255 + 1 + 4

// memberlist's wire format (v0.7.0 net.go and label.go): a stream may
// start with a label header (hasLabelMsg, its length, the label); then
// the message type; an encrypted message's type is followed by the
// length of its ciphertext.
const (
	hasLabelMsg = 244
	encryptMsg  = 10
)

// claimOf reads the first bytes of a stream: the bytes the stream claims
// to send (its label header, type byte and length included) if it is an
// encrypted message, or -1 if it is not; done is false while it needs
// more bytes.
func claimOf(head []byte) (claim int64, done bool) {
	i := 0
	if len(head) > 0 && head[0] == hasLabelMsg {
		if len(head) < 2 {
			return 0, false
		}
		i = 2 + int(head[1])
	}
	if len(head) < i+1 {
		return 0, false
	}
	if head[i] != encryptMsg {
		return -1, true
	}
	if len(head) < i+5 {
		return 0, false
	}
	return int64(i+5) + int64(binary.BigEndian.Uint32(head[i+1:])), true
}

func (c *inboundConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	// One byte past the budget tells a stream that sends more.
	limit := c.limits.maxBytes
	var one [1]byte
	switch room := limit - c.read; {
	case room == 0 && len(p) > 0:
		p = one[:] // at the limit: a byte more tells a stream that sends more
	case int64(len(p)) > room:
		p = p[:room]
	}
	n, err := c.Conn.Read(p)
	if !c.seen {
		c.seen = true
		if n == 0 && err == io.EOF {
			c.hooks.empty(c.RemoteAddr().String())
		}
	}
	c.read += int64(n)
	switch {
	case c.read > limit:
		return 0, c.drop(dropOversized, fmt.Sprintf("sent more than %d bytes", limit))
	case errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(c.readBy):
		return n, c.drop(dropTimeout, fmt.Sprintf("sent %d bytes in %v", c.read, c.limits.readTimeout))
	}
	if !c.decided && n > 0 {
		c.head = append(c.head, p[:min(n, headMax-len(c.head))]...)
		claim, done := claimOf(c.head)
		if done {
			c.decided, c.head = true, nil
			if claim > limit {
				return 0, c.drop(dropOversized, fmt.Sprintf("claims %d bytes, the most is %d", claim, limit))
			}
		}
	}
	return n, err
}

// drop counts the stream dropped, closes it, and returns the error its
// reads return from now on.
func (c *inboundConn) drop(reason, detail string) error {
	e := &streamDropped{reason: reason, detail: detail}
	c.err = e
	c.hooks.dropped(e, c.RemoteAddr().String())
	_ = c.Close()
	return e
}

// SetDeadline implements net.Conn: the read deadline stays at most the
// stream's own.
func (c *inboundConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// SetReadDeadline implements net.Conn: the deadline stays at most the
// stream's own.
func (c *inboundConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() || t.After(c.readBy) {
		t = c.readBy
	}
	return c.Conn.SetReadDeadline(t)
}

// Close implements net.Conn, and frees the stream's place.
func (c *inboundConn) Close() error {
	err := net.ErrClosed
	c.closed.Do(func() {
		err = c.Conn.Close()
		c.release()
	})
	return err
}
