package integration

import (
	"encoding/binary"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/gossip"
)

// The hostile streams of TestGossipHostileStreams.
const (
	hostileStreams = 1000     // TCP connections to the gossip port, all open at once
	hostileClaim   = 20 << 20 // the length each claims for its encrypted message: memberlist's limit
	hostileRSS     = 100 << 20
	// hostileCeiling stops the attack once the node has grown by this
	// much (on a node without the stream limits, which reads each claim
	// whole), so that the test fails without taking the machine's memory.
	hostileCeiling = 1536 << 20
	hostileLines   = 50 // the most log lines the attack may add
)

// encryptMsg is memberlist's message type of an encrypted message
// (net.go): after it, the length of the ciphertext (4 bytes, big-endian),
// then the ciphertext, which memberlist reads whole before decrypting.
const encryptMsg = 10

// TestGossipHostileStreams: 1,000 TCP connections to a node's gossip
// port, all open at once, each with the cluster's label and an encrypted
// message that claims 20 MiB, then writing those bytes. No key is
// needed to send that. The node's resident memory grows by less than
// 100 MiB (memberlist alone reads each claim whole before it tries to
// decrypt: 30 connections took a node from 58 to 931 MiB), each
// connection is dropped and counted once (stream_oversized, or
// stream_excess past the cap on streams at once), the log grows by a few
// sampled lines, and the node still serves and its peer still sees it.
// Then 1,000 more claim and send what the cap lets through
// (gossip.MaxStreamBytes), which memberlist reads and fails to decrypt
// ("decrypt"): the cap on streams at once keeps the node's memory as
// well. EDGELIMIT_HOSTILE_STREAMS sets another number of connections.
func TestGossipHostileStreams(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	n := hostileStreams
	if s := os.Getenv("EDGELIMIT_HOSTILE_STREAMS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("EDGELIMIT_HOSTILE_STREAMS=%q: %v", s, err)
		}
	}
	for _, claim := range []int{hostileClaim, gossip.MaxStreamBytes - len(gossipLabel) - 5} {
		reasons := []string{"stream_oversized", "stream_excess", "stream_timeout"}
		if claim < hostileClaim {
			reasons[0] = "decrypt"
		}
		delta := hostileStreamsAttack(t, a, n, claim, reasons)
		if delta[reasons[0]] == 0 {
			t.Errorf("claims of %d bytes: drops %v, none %s", claim, delta, reasons[0])
		}
		// The node still serves, and still sees its peer, which sees it.
		if code := a.status(t, "/api/x", "X-Api-Key", "after"); code != http.StatusOK {
			t.Errorf("after the attack: %d, want 200", code)
		}
		a.waitMembers(t, 2)
		nodes[1].waitMembers(t, 2)
	}
}

// hostileStreamsAttack opens n connections to a's gossip port at once,
// each writing the label and an encrypted message's header claiming
// claim bytes, then as many bytes; it checks that a's memory grows by at
// most hostileRSS, that each connection is dropped and counted once
// under one of reasons, and that the log grows by at most hostileLines,
// and returns the drops counted.
func hostileStreamsAttack(t *testing.T, a *caddyProc, n, claim int, reasons []string) map[string]uint64 {
	t.Helper()
	addr := a.gossipAddr(t)
	if code := a.status(t, "/api/x", "X-Api-Key", "before"); code != http.StatusOK {
		t.Fatalf("before the attack: %d, want 200", code)
	}
	rssBefore := a.rss(t)
	droppedBefore := gossipDropped(t, a)
	linesBefore := strings.Count(a.log(), "\n")

	header := append(append([]byte(nil), gossipLabel...), encryptMsg, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(header[len(header)-4:], uint32(claim))
	chunk := make([]byte, 64<<10)
	var (
		mu      sync.Mutex
		conns   []net.Conn
		stopped bool
	)
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		for _, c := range conns {
			c.Close()
		}
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return // refused: the node dropped it before memberlist saw it
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write(header); err != nil {
				return
			}
			for sent := 0; sent < claim; sent += len(chunk) {
				if _, err := c.Write(chunk[:min(len(chunk), claim-sent)]); err != nil {
					return
				}
			}
		})
	}
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()

	// The node's memory while the connections write, and for 2 s after
	// (memberlist holds a stream it reads for up to 10 s).
	var peak int64
	var end time.Time // 2 s after every connection has written or failed
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rss := a.rss(t)
		peak = max(peak, rss)
		if rss-rssBefore > hostileCeiling {
			t.Logf("the node grew by %d MiB: attack stopped", (rss-rssBefore)>>20)
			break
		}
		if end.IsZero() {
			select {
			case <-sent:
				end = time.Now().Add(2 * time.Second)
			default:
			}
		} else if time.Now().After(end) {
			break
		}
		<-tick.C
	}
	stop()
	<-sent
	t.Logf("%d hostile streams of %d bytes claimed: RSS %d MiB before, peak %d MiB (+%d MiB)",
		n, claim, rssBefore>>20, peak>>20, (peak-rssBefore)>>20)
	if peak-rssBefore > hostileRSS {
		t.Errorf("RSS grew by %d MiB under %d hostile streams, want at most %d MiB", (peak-rssBefore)>>20, n, hostileRSS>>20)
	}

	// Each connection is dropped and counted once (and the peer's own
	// streams are not dropped: at most 2 more).
	var delta map[string]uint64
	var streams uint64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		dropped := gossipDropped(t, a)
		delta, streams = make(map[string]uint64), 0
		for reason, c := range dropped {
			if d := c - droppedBefore[reason]; d > 0 {
				delta[reason] = d
			}
		}
		for _, reason := range reasons {
			streams += delta[reason]
		}
		if streams >= uint64(n) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("dropped_total +%v", delta)
	if streams < uint64(n) || streams > uint64(n)+2 {
		t.Errorf("stream drops %d (%v), want %d, one a connection", streams, delta, n)
	}
	added := strings.Split(a.log(), "\n")[linesBefore:]
	added = added[:len(added)-1]
	if len(added) > hostileLines {
		t.Errorf("the log grew by %d lines, want at most %d; the first ones:\n%s",
			len(added), hostileLines, strings.Join(added[:min(len(added), 10)], "\n"))
	} else {
		for _, line := range added {
			t.Logf("log: %s", line)
		}
	}

	return delta
}
