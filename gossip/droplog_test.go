package gossip

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// memberlistLines are log lines as memberlist v0.7.0 writes them (the
// formats of net.go and net_transport.go, filled in), with what
// classifyLine must make of them.
var memberlistLines = []struct {
	line  string
	class string
	drop  bool
}{
	// packets
	{`[ERR] memberlist: discarding packet with unacceptable label "": from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: discarding packet with unacceptable label "other\x00": from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: cannot decode label; packet has been truncated from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: label header cannot be empty when present from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: unexpected double packet label header: from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: Decrypt packet failed: unsupported encryption version 77 from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: Decrypt packet failed: payload is too small to decrypt: 3 from=[::1]:40000`, "decrypt", true},
	{`[ERR] memberlist: UDP packet too short (65536 bytes) from=127.0.0.1:40000`, "truncated", true},
	{`[WARN] memberlist: Got invalid checksum for UDP packet: 1a2b3c4d, 5e6f7a8b`, "decode", true},
	{`[ERR] memberlist: missing message type byte from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: msg type (99) not supported from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Message type (9) not supported from=127.0.0.1:40000 (packet handler)`, "decode", true},
	{`[ERR] memberlist: Failed to decode compound request: missing compound length byte from=127.0.0.1:40000`, "decode", true},
	{`[WARN] memberlist: Compound request had 2 truncated messages from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Failed to decompress payload: unexpected EOF from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Failed to decode ping request: msgpack decode error [pos 1]: only encoded map or array can be decoded into a struct from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Failed to decode alive message: EOF from=127.0.0.1:40000`, "decode", true},
	{`[WARN] memberlist: handler queue full, dropping message (6) from=127.0.0.1:40000`, "overflow", true},
	{`[WARN] memberlist: Got ping for unexpected node 'edge-9' from=127.0.0.1:40000`, "other", true},
	// streams
	{`[ERR] memberlist: discarding stream with unacceptable label "": from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: failed to receive and remove the stream label header: cannot decode label; stream has been truncated from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: failed to receive and remove the stream label header: read tcp 127.0.0.1:7946->127.0.0.1:40000: i/o timeout from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: unexpected double stream label header: from=127.0.0.1:40000`, "label", true},
	{`[ERR] memberlist: failed to receive: encryption is configured but remote state is not encrypted from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: failed to receive: unsupported encryption version 200 from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: failed to receive: remote state is encrypted and encryption is not configured from=127.0.0.1:40000`, "decrypt", true},
	{`[ERR] memberlist: failed to receive: remote node state is larger than limit (3735928559) from=127.0.0.1:40000`, "too_large", true},
	{`[ERR] memberlist: failed to receive: unexpected EOF from=127.0.0.1:40000`, "truncated", true},
	{`[ERR] memberlist: failed to receive: read tcp 127.0.0.1:7946->127.0.0.1:40000: i/o timeout from=127.0.0.1:40000`, "truncated", true},
	{`[ERR] memberlist: failed to receive: read tcp 127.0.0.1:7946->127.0.0.1:40000: read: connection reset by peer from=127.0.0.1:40000`, "truncated", true},
	{`[ERR] memberlist: failed to receive: msgpack decode error [pos 3]: invalid length of bytes for decoding time from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Failed to receive user message: msgpack decode error [pos 1]: cannot decode from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Failed to read remote state: number of nodes in header (99999) exceeds limit from=127.0.0.1:40000`, "too_large", true},
	{`[ERR] memberlist: Failed to read remote state: unexpected EOF from=127.0.0.1:40000`, "truncated", true},
	{`[ERR] memberlist: Failed to read remote state: failed to read full user state (3 / 9) from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Received invalid msgType (42) from=127.0.0.1:40000`, "decode", true},
	{`[ERR] memberlist: Too many pending push/pull requests`, "overflow", true},
	{`[ERR] memberlist: Failed to decode ping: EOF from=127.0.0.1:40000`, "decode", true},
	// sampled with the drops, not counted
	{`[DEBUG] memberlist: Stream connection from=127.0.0.1:40000`, classStream, false},
	{`[ERR] memberlist: Failed to send error: write tcp 127.0.0.1:7946->127.0.0.1:40000: write: broken pipe from=127.0.0.1:40000`, classStream, false},
	{`[WARN] memberlist: Remote node state size is (15000000) limit is (20971520)`, classStream, false},
	// the rest: as they are
	{`[DEBUG] memberlist: Initiating push/pull sync with: edge-2 127.0.0.1:7946`, "", false},
	{`[INFO] memberlist: Suspect edge-2 has failed, no acks received`, "", false},
	{`[INFO] memberlist: Marking edge-2 as failed, suspect timeout reached (0 peer confirmations)`, "", false},
	{`[ERR] memberlist: Failed to send gossip to 127.0.0.1:7946: write udp 127.0.0.1:7946->127.0.0.1:7947: sendto: connection refused`, "", false},
	{`[ERR] memberlist: Push/Pull with edge-2 failed: dial tcp 127.0.0.1:7947: connect: connection refused`, "", false},
	{`[ERR] memberlist: Error accepting TCP connection: accept tcp 127.0.0.1:7946: accept4: too many open files`, "", false},
	{`[WARN] gossip: join [127.0.0.1:7947]: 1 error occurred; retrying in 200ms`, "", false},
	{`Err: Could not set the deadline: set tcp 127.0.0.1:7946: use of closed network connection`, "", false},
	{``, "", false},
}

func TestClassifyLine(t *testing.T) {
	for i, tc := range memberlistLines {
		if got := classifyLine(tc.line); got != (lineClass{tc.class, tc.drop}) {
			t.Errorf("Test %d: %q: %+v, want %q (drop %v)", i, tc.line, got, tc.class, tc.drop)
		}
	}
}

func FuzzClassifyLine(f *testing.F) {
	for _, tc := range memberlistLines {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		lc := classifyLine(line)
		if lc.drop && !slices.Contains(dropReasons[:], lc.class) {
			t.Fatalf("%q: a drop of reason %q, not one of %v", line, lc.class, dropReasons)
		}
		if !lc.drop && lc.class != "" && lc.class != classStream {
			t.Fatalf("%q: class %q", line, lc.class)
		}
		out, counted := testDropLog(&fakeClock{t: t0})
		if _, err := out.dl.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		if n := len(counted.reasons()); lc.drop != (n == 1) || n > 1 {
			t.Fatalf("%q: counted %v", line, counted.reasons())
		}
	})
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// reasonCounter records what a dropLog counts.
type reasonCounter struct {
	mu sync.Mutex
	by []string
}

func (r *reasonCounter) count(reason string) {
	r.mu.Lock()
	r.by = append(r.by, reason)
	r.mu.Unlock()
}

func (r *reasonCounter) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by)
}

// logBuffer is a log.Logger's output, safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	dl  *dropLog
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSuffix(b.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func testDropLog(clock *fakeClock) (*logBuffer, *reasonCounter) {
	out, counted := &logBuffer{}, &reasonCounter{}
	out.dl = newDropLog(log.New(out, "", 0), counted.count)
	out.dl.now = clock.now
	return out, counted
}

// TestDropLogFlood: 5 s of a flood of two kinds of junk, 2,000 lines a
// second of each, through a dropLog on a fake clock: every line is
// counted, and the log has the first of each reason and one a second
// after, each saying how many were not written.
func TestDropLogFlood(t *testing.T) {
	clock := &fakeClock{t: t0}
	out, counted := testDropLog(clock)
	lines := []string{
		`[ERR] memberlist: discarding packet with unacceptable label "": from=127.0.0.1:40000`,
		`[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:40001`,
	}
	const seconds, perSecond = 5, 2000
	for range seconds * perSecond {
		for _, l := range lines {
			if _, err := out.dl.Write([]byte(l + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		clock.advance(time.Second / perSecond)
	}
	byReason := make(map[string]int)
	for _, r := range counted.reasons() {
		byReason[r]++
	}
	if byReason["label"] != seconds*perSecond || byReason["decrypt"] != seconds*perSecond || len(byReason) != 2 {
		t.Errorf("counted %v, want %d label and %d decrypt", byReason, seconds*perSecond, seconds*perSecond)
	}
	got := out.lines()
	if len(got) != 2*seconds {
		t.Errorf("%d lines written, want %d (the first of each reason, then one a second):\n%s", len(got), 2*seconds, strings.Join(got, "\n"))
	}
	for i, l := range got {
		switch {
		case i < 2 && (l != lines[0] && l != lines[1]):
			t.Errorf("line %d: %q, want the first drop of its reason as it was", i, l)
		case i >= 2 && !strings.HasSuffix(l, " more label lines since the last, not logged)") && !strings.HasSuffix(l, " more decrypt lines since the last, not logged)"):
			t.Errorf("line %d: %q, want the count of lines not logged", i, l)
		}
	}
	if len(got) > 2 && !strings.Contains(got[2], "(and 1999 more") {
		t.Errorf("line 2: %q, want 1999 more", got[2])
	}

	// other lines pass as they are
	other := `[INFO] memberlist: Suspect edge-2 has failed, no acks received`
	for range 3 {
		out.dl.Write([]byte(other + "\n"))
	}
	if n := len(out.lines()) - len(got); n != 3 {
		t.Errorf("3 lines of no class: %d written", n)
	}
}

// TestDropLogEmptyStream: memberlist's line for a stream without the
// label is counted "empty" for a stream the stream watch saw end before
// its first byte, "label" for any other.
func TestDropLogEmptyStream(t *testing.T) {
	out, counted := testDropLog(&fakeClock{t: t0})
	line := func(port int) []byte {
		return fmt.Appendf(nil, "[ERR] memberlist: discarding stream with unacceptable label \"\": from=127.0.0.1:%d\n", port)
	}
	out.dl.emptyStream("127.0.0.1:40001")
	for _, p := range []int{40000, 40001, 40001} {
		out.dl.Write(line(p))
	}
	if got := counted.reasons(); !slices.Equal(got, []string{"label", "empty", "label"}) {
		t.Errorf("counted %v, want label, empty (the stream seen empty), label (its address used again)", got)
	}
	for i := range 2 * maxEmpty {
		out.dl.emptyStream(fmt.Sprint("127.0.0.1:", i))
	}
	if n := len(out.dl.empty); n > maxEmpty {
		t.Errorf("%d empty streams remembered, want at most %d", n, maxEmpty)
	}
}

// TestJunkOnGossipPort: junk sent to a real node's port, UDP packets and
// TCP streams, some behind the cluster's label: memberlist's lines for
// them, as it really writes them, are each counted once under their
// reason, and sampled.
func TestJunkOnGossipPort(t *testing.T) {
	out := &logBuffer{}
	c, err := New(Config{
		NodeName:   "target",
		Bind:       "127.0.0.1:0",
		SecretKeys: [][]byte{testKey},
		Tune:       fastTune,
		Logger:     log.New(out, "", 0),
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	label := append([]byte{244, byte(len("edgelimit"))}, "edgelimit"...)
	junk := func(i int) []byte {
		b := make([]byte, 64)
		rand.Read(b)
		if i%2 == 1 {
			copy(b, label)
		} else if b[0] == 244 {
			b[0] = 0 // no label: the "label" drops are exactly the even ones
		}
		return b
	}
	const packets, conns = 400, 20
	udp, err := net.Dial("udp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for i := range packets {
		if _, err := udp.Write(junk(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range conns {
		tc, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		tc.Write(junk(i))
		tc.Close()
	}
	// also: an empty packet, a stream with the label and nothing else but
	// the encryption byte and a huge size, and empty streams (a port scan)
	udp.Write(nil)
	tc, err := net.Dial("tcp", c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tc.Write(append(append([]byte(nil), label...), 10, 0xff, 0xff, 0xff, 0xff)) // encryptMsg, 4 GiB: over MaxStreamBytes
	tc.Close()
	const empty = 5
	for range empty {
		tc, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		tc.Close()
	}

	want := map[string]uint64{"label": packets/2 + conns/2, "decrypt": packets / 2, "truncated": 1, dropOversized: 1, "empty": empty}
	var got map[string]uint64
	waitFor(t, 5*time.Second, "every piece of junk counted", func() bool {
		got = c.Stats().Dropped
		var sum, wantSum uint64
		for _, n := range got {
			sum += n
		}
		for _, n := range want {
			wantSum += n
		}
		return sum >= wantSum+conns/2
	})
	// the labelled streams fail decryption, or are too large or cut short
	// by what their random bytes say
	streamed := got["decrypt"] + got[dropOversized] + got["truncated"] - want["decrypt"] - want[dropOversized] - want["truncated"]
	if got["label"] != want["label"] || got["decrypt"] < want["decrypt"] || streamed != conns/2 || got["truncated"] < 1 || got[dropOversized] < 1 || got["empty"] != empty {
		t.Errorf("dropped %v, want label %d, decrypt %d, truncated and stream_oversized 1 each, empty %d, and %d labelled streams among decrypt, stream_oversized and truncated",
			got, want["label"], want["decrypt"], empty, conns/2)
	}
	lines := out.lines()
	for _, l := range lines {
		if lc := classifyLine(l); lc.class == "" && strings.Contains(l, "from=127.0.0.1") {
			t.Errorf("a line about the junk passed unsampled: %q", l)
		}
	}
	// a line per class, two if the test crossed a second
	if len(lines) > 2*7 {
		t.Errorf("%d lines logged for %d pieces of junk:\n%s", len(lines), packets+conns+2, strings.Join(lines, "\n"))
	}
	t.Logf("dropped %v; %d lines logged:\n%s", got, len(lines), strings.Join(lines, "\n"))
}

// TestRejectsSampled: malformed messages from a member (who holds the
// key) are counted one by one, and logged through the same sampler.
func TestRejectsSampled(t *testing.T) {
	out := &logBuffer{}
	target, err := New(Config{
		NodeName:   "target",
		Bind:       "127.0.0.1:0",
		SecretKeys: [][]byte{testKey},
		Tune:       fastTune,
		Logger:     log.New(out, "", 0),
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	sender := startNode(t, "sender", testKey, target.Addr())
	waitFor(t, 10*time.Second, "the sender to join", func() bool { return len(sender.c.others()) == 1 })
	to := sender.c.others()[0]
	const n = 300
	for range n {
		if err := sender.c.ml.SendBestEffort(to, []byte{9, 1}); err != nil { // version 9
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "the messages to be dropped", func() bool { return target.Stats().Dropped["version"] == n })
	var logged []string
	for _, l := range out.lines() {
		if strings.Contains(l, "gossip: dropped a message") {
			logged = append(logged, l)
		}
	}
	if len(logged) == 0 || len(logged) > 3 {
		t.Errorf("%d lines logged for %d malformed messages, want 1 to 3 (a second at most):\n%s", len(logged), n, strings.Join(logged, "\n"))
	}
}
