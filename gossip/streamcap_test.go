package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// streamMeter wraps a transport and keeps the most bytes memberlist read
// from one received stream.
type streamMeter struct {
	memberlist.NodeAwareTransport
	streams chan net.Conn
	most    atomic.Int64 // the most bytes read from one stream
	ended   atomic.Int64 // streams closed
}

func newStreamMeter(inner memberlist.NodeAwareTransport) *streamMeter {
	m := &streamMeter{NodeAwareTransport: inner, streams: make(chan net.Conn)}
	go func() {
		for c := range inner.StreamCh() {
			m.streams <- &meteredConn{Conn: c, m: m}
		}
	}()
	return m
}

func (m *streamMeter) StreamCh() <-chan net.Conn { return m.streams }

type meteredConn struct {
	net.Conn
	m    *streamMeter
	read int64
}

func (c *meteredConn) Close() error {
	c.m.ended.Add(1)
	return c.Conn.Close()
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	for most := c.m.most.Load(); c.read > most && !c.m.most.CompareAndSwap(most, c.read); most = c.m.most.Load() {
	}
	return n, err
}

// pushPullBytes starts a cluster of n nodes whose names are MaxNodeName
// bytes long, waits for a few push/pulls of the whole member list, and
// returns the largest stream a node received.
func pushPullBytes(t *testing.T, n int) int64 {
	t.Helper()
	var meters []*streamMeter
	var nodes []*Cluster
	for i := range n {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].Addr()}
		}
		name := fmt.Sprintf("%d-", i) + strings.Repeat("n", MaxNodeName)
		c, err := New(Config{
			NodeName: name[:MaxNodeName], Bind: "127.0.0.1:0", Join: seeds, SecretKeys: [][]byte{testKey},
			Rejoin: 200 * time.Millisecond, Tune: fastTune,
			WrapTransport: func(tr memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
				m := newStreamMeter(tr)
				meters = append(meters, m)
				return m
			},
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, c)
	}
	waitFor(t, 10*time.Second, "membership to converge", func() bool {
		for _, c := range nodes {
			if strings.Count(aliveNames(c), ",") != n-1 {
				return false
			}
		}
		return true
	})
	// Every push/pull from now on carries the whole list (fastTune
	// pushes and pulls every 500 ms): wait for n streams.
	ended := func() (sum int64) {
		for _, m := range meters {
			sum += m.ended.Load()
		}
		return sum
	}
	for _, m := range meters {
		m.most.Store(0)
	}
	from := ended()
	waitFor(t, 10*time.Second, "push/pulls of the whole list", func() bool { return ended()-from >= int64(n) })
	var most int64
	for _, m := range meters {
		most = max(most, m.most.Load())
	}
	return most
}

// TestStreamBudgetFitsPushPull measures the largest stream members send
// (a push/pull of the member list) at 3 and 9 members named with
// MaxNodeName bytes, and checks that MaxStreamBytes holds that of
// MaxStreamMembers twice, and pushStateBytes bounds a member's.
func TestStreamBudgetFitsPushPull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 nodes")
	}
	small, large := pushPullBytes(t, 3), pushPullBytes(t, 9)
	per := (large - small) / 6
	fixed := small - 3*per
	need := fixed + MaxStreamMembers*per
	t.Logf("push/pull: %d bytes at 3 members, %d at 9: %d a member, %d fixed; %d members: %d bytes, MaxStreamBytes %d",
		small, large, per, fixed, MaxStreamMembers, need, MaxStreamBytes)
	if per > pushStateBytes {
		t.Errorf("a member takes %d bytes of a push/pull, pushStateBytes says at most %d", per, pushStateBytes)
	}
	if bound := fixed + MaxStreamMembers*pushStateBytes; 2*bound > MaxStreamBytes {
		t.Errorf("%d members at pushStateBytes take %d bytes, MaxStreamBytes %d is less than twice that", MaxStreamMembers, bound, MaxStreamBytes)
	}
	if 2*need > MaxStreamBytes {
		t.Errorf("a push/pull of %d members takes %d bytes, MaxStreamBytes %d is less than twice that", MaxStreamMembers, need, MaxStreamBytes)
	}
}

// TestClaimOf: the claim of a stream's first bytes, label or not.
func TestClaimOf(t *testing.T) {
	label := append([]byte{hasLabelMsg, 9}, "edgelimit"...)
	enc := func(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{encryptMsg}, n) }
	cat := func(b ...[]byte) []byte { return slices.Concat(b...) }
	for i, tc := range []struct {
		head  []byte
		claim int64
		done  bool
	}{
		{nil, 0, false},
		{[]byte{hasLabelMsg}, 0, false},
		{label[:5], 0, false},
		{label, 0, false},
		{cat(label, []byte{encryptMsg, 0, 0}), 0, false},
		{cat(label, enc(20<<20)), 11 + 5 + 20<<20, true},
		{enc(100), 105, true},
		{enc(0), 5, true},
		{[]byte{6}, -1, true},                          // a push/pull in clear
		{cat(label, []byte{8}), -1, true},              // a user message in clear
		{[]byte{hasLabelMsg, 0, encryptMsg}, 0, false}, // an empty label: memberlist refuses it
		{cat([]byte{hasLabelMsg, 0}, enc(7)), 14, true},
	} {
		claim, done := claimOf(tc.head)
		if claim != tc.claim || done != tc.done {
			t.Errorf("Test %d: claimOf(%v) = %d, %v, want %d, %v", i, tc.head, claim, done, tc.claim, tc.done)
		}
	}
}

// streamTrace is what an inboundConn told its hooks and its reader.
type streamTrace struct {
	mu       sync.Mutex
	empties  int
	drops    []string
	releases int
}

func (s *streamTrace) hooks() streamHooks {
	return streamHooks{
		empty: func(string) { s.mu.Lock(); s.empties++; s.mu.Unlock() },
		dropped: func(e *streamDropped, _ string) {
			s.mu.Lock()
			s.drops = append(s.drops, e.reason)
			s.mu.Unlock()
		},
	}
}

func (s *streamTrace) release() { s.mu.Lock(); s.releases++; s.mu.Unlock() }

// readAll reads c as memberlist does, 4096 bytes at a time, until an
// error, and closes it.
func readAll(c net.Conn) ([]byte, error) {
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			c.Close()
			return got, err
		}
	}
}

// TestInboundConn: a received stream delivers what it sends up to its
// limit, and is dropped once, as oversized, when it claims or sends
// more; an empty one is told; each releases its place once.
func TestInboundConn(t *testing.T) {
	const limit = 1000
	label := append([]byte{hasLabelMsg, 9}, "edgelimit"...)
	enc := func(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{encryptMsg}, n) }
	fill := func(n int) []byte { return make([]byte, n) }
	for i, tc := range []struct {
		send      []byte
		delivered int
		drop      string
	}{
		{slices.Concat(label, enc(20<<20), fill(3000)), 0, dropOversized},
		{slices.Concat(label, enc(limit-16+1), fill(limit-16+1)), 0, dropOversized},
		{slices.Concat(label, enc(limit-16), fill(limit-16)), limit, ""},
		{slices.Concat(enc(100), fill(100)), 105, ""},
		{slices.Concat([]byte{6}, fill(limit+500)), limit, dropOversized}, // in clear: the byte budget
		{slices.Concat([]byte{6}, fill(limit-1)), limit, ""},
		{nil, 0, ""},
	} {
		var tr streamTrace
		server, client := net.Pipe()
		go func() {
			for b := tc.send; len(b) > 0; b = b[min(len(b), 700):] {
				if _, err := client.Write(b[:min(len(b), 700)]); err != nil {
					break
				}
			}
			client.Close()
		}()
		ic := newInboundConn(server, streamLimits{maxBytes: limit, maxStreams: 1, readTimeout: 10 * time.Second}, tr.hooks(), tr.release)
		got, err := readAll(ic)
		ic.Close()
		if len(got) != tc.delivered || !slices.Equal(got, tc.send[:len(got)]) {
			t.Errorf("Test %d: delivered %d bytes, want the first %d sent", i, len(got), tc.delivered)
		}
		var wantDrops []string
		if tc.drop != "" {
			wantDrops = []string{tc.drop}
			if !strings.Contains(err.Error(), streamDroppedText+" ("+tc.drop+")") {
				t.Errorf("Test %d: error %q, want a %s drop", i, err, tc.drop)
			}
		}
		if !slices.Equal(tr.drops, wantDrops) {
			t.Errorf("Test %d: drops %v, want %v", i, tr.drops, wantDrops)
		}
		if wantEmpty := len(tc.send) == 0; (tr.empties == 1) != wantEmpty || tr.empties > 1 {
			t.Errorf("Test %d: empty told %d times", i, tr.empties)
		}
		if tr.releases != 1 {
			t.Errorf("Test %d: place released %d times, want 1", i, tr.releases)
		}
	}
}

// TestInboundConnDeadline: a stream that has not sent its message
// within its read timeout is dropped, though memberlist set a later
// deadline.
func TestInboundConnDeadline(t *testing.T) {
	var tr streamTrace
	server, client := net.Pipe()
	defer client.Close()
	go client.Write([]byte{hasLabelMsg, 9, 'e'})
	ic := newInboundConn(server, streamLimits{maxBytes: 1000, maxStreams: 1, readTimeout: 50 * time.Millisecond}, tr.hooks(), tr.release)
	if err := ic.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := readAll(ic)
	if took := time.Since(start); len(got) != 3 || took > 5*time.Second {
		t.Errorf("read %d bytes in %v, want 3 then the deadline", len(got), took)
	}
	if !slices.Equal(tr.drops, []string{dropTimeout}) || !strings.Contains(err.Error(), dropTimeout) {
		t.Errorf("drops %v, error %v: want one %s", tr.drops, err, dropTimeout)
	}
}

// sliceConn is a net.Conn whose reads give b in pieces of the sizes
// cuts says, then io.EOF.
type sliceConn struct {
	net.Conn
	b    []byte
	cuts []byte
}

func (c *sliceConn) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(c.b)
	if len(c.cuts) > 0 {
		n, c.cuts = int(c.cuts[0])+1, c.cuts[1:]
	}
	n = copy(p, c.b[:min(n, len(c.b))])
	c.b = c.b[n:]
	return n, nil
}

func (c *sliceConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *sliceConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sliceConn) SetWriteDeadline(time.Time) error { return nil }
func (c *sliceConn) Close() error                     { return nil }

// FuzzInboundConn: whatever a stream sends, in whatever pieces, the
// reader gets a prefix of it, never more than the limit, and the stream
// is dropped once, as oversized, exactly when it claims or sends more.
func FuzzInboundConn(f *testing.F) {
	f.Add([]byte{hasLabelMsg, 1, 'x', encryptMsg, 0, 0, 0, 200}, []byte{0, 3}, uint16(100))
	f.Add([]byte{encryptMsg, 0, 0, 0, 10, 1, 2, 3}, []byte{}, uint16(15))
	f.Add([]byte{6, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{1, 1}, uint16(5))
	f.Add([]byte{}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, send, cuts []byte, limit uint16) {
		var tr streamTrace
		ic := newInboundConn(&sliceConn{b: send, cuts: cuts}, streamLimits{maxBytes: int64(limit), maxStreams: 1, readTimeout: time.Hour}, tr.hooks(), tr.release)
		got, err := readAll(ic)
		if !slices.Equal(got, send[:len(got)]) || len(got) > int(limit) {
			t.Fatalf("delivered %d bytes of %d, limit %d: not a prefix within the limit", len(got), len(send), limit)
		}
		head := send[:min(len(send), headMax)]
		claim, done := claimOf(head)
		over := len(send) > int(limit) || (done && claim > int64(limit))
		if over != slices.Equal(tr.drops, []string{dropOversized}) || len(tr.drops) > 1 {
			t.Fatalf("sent %d bytes claiming %d (%v), limit %d: drops %v", len(send), claim, done, limit, tr.drops)
		}
		if !over && (err != io.EOF || len(got) != len(send)) {
			t.Fatalf("sent %d bytes within the limit: got %d, %v", len(send), len(got), err)
		}
		if tr.releases != 1 || (tr.empties == 1) != (len(send) == 0) {
			t.Fatalf("releases %d, empties %d", tr.releases, tr.empties)
		}
	})
}

// TestStreamLimits: on a node with a key, streams past MaxInboundStreams
// open are closed at once (stream_excess); a stream with the label and
// an encrypted message claiming 20 MiB is closed at its header
// (stream_oversized); each is counted once, and a node that joins
// afterwards (a push/pull) is let in.
func TestStreamLimits(t *testing.T) {
	a := startNode(t, "a", testKey)
	header := slices.Concat([]byte{hasLabelMsg, 9}, []byte("edgelimit"), binary.BigEndian.AppendUint32([]byte{encryptMsg}, 20<<20))
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", a.c.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closedByNode waits (5 s at most) for the node to close c.
	closedByNode := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	dropped := func(reason string) uint64 { return a.c.Stats().Dropped[reason] }

	var held []net.Conn
	for range MaxInboundStreams {
		c := dial()
		c.Write(header[:5]) // the label, in part: memberlist waits for the rest
		held = append(held, c)
	}
	waitFor(t, 5*time.Second, "the streams to be taken", func() bool { return len(a.ft.NodeAwareTransport.(*streamWatch).open) == MaxInboundStreams })
	extra := dial()
	if closed := closedByNode(extra); !closed || dropped(dropExcess) != 1 {
		t.Errorf("a stream past %d open: closed %v, stream_excess %d, want closed and 1", MaxInboundStreams, closed, dropped(dropExcess))
	}
	extra.Close()
	for _, c := range held {
		c.Close()
	}
	waitFor(t, 5*time.Second, "the streams' places to be freed", func() bool { return len(a.ft.NodeAwareTransport.(*streamWatch).open) == 0 })

	hostile := dial()
	defer hostile.Close()
	if _, err := hostile.Write(header); err != nil {
		t.Fatal(err)
	}
	if closed := closedByNode(hostile); !closed || dropped(dropOversized) != 1 {
		t.Errorf("a stream claiming 20 MiB: closed %v, stream_oversized %d, want closed and 1", closed, dropped(dropOversized))
	}

	b := startNode(t, "b", testKey, a.c.Addr())
	waitFor(t, 10*time.Second, "b to join", func() bool { return aliveNames(a.c) == "a,b" && aliveNames(b.c) == "a,b" })
	for _, r := range []string{dropExcess, dropOversized, dropTimeout} {
		if want := map[string]uint64{dropExcess: 1, dropOversized: 1}[r]; dropped(r) != want {
			t.Errorf("%s: %d, want %d", r, dropped(r), want)
		}
	}
}
