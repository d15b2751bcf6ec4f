package integration

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The junk sent to a node's gossip port by TestGossipJunk.
const (
	junkPackets = 20000 // UDP packets of junkBytes random bytes
	junkConns   = 200   // TCP connections, each writing junkBytes random bytes
	junkBytes   = 64
	junkLines   = 50 // the most log lines the junk may add
)

// gossipLabel is memberlist's label header for the default label
// "edgelimit" (type 244, length, label): junk that starts with it passes
// the label check and fails decryption instead.
var gossipLabel = append([]byte{244, byte(len("edgelimit"))}, "edgelimit"...)

// TestGossipJunk: random UDP packets and junk TCP connections to a
// node's gossip port (half of them behind the cluster's label, so that
// they reach decryption) are each dropped and counted in
// caddy_rate_limit_gossip_dropped_total, the log grows by a few sampled
// lines, not one a packet, and the node still serves and still sees its
// peer.
func TestGossipJunk(t *testing.T) {
	nodes := startCluster(t, 2)
	a := nodes[0]
	addr := a.gossipAddr(t)
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)

	linesBefore := strings.Count(a.log(), "\n")
	droppedBefore := gossipDropped(t, a)
	kernelBefore, kernelOK := udpLoss(port)

	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	junk := func(i int) []byte {
		b := make([]byte, junkBytes)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%2 == 1 {
			copy(b, gossipLabel)
		}
		return b
	}
	udp, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range junkPackets {
		if _, err := udp.Write(junk(i)); err != nil {
			t.Fatalf("UDP packet %d: %v", i, err)
		}
		if i%250 == 249 {
			udpDrain(port) // a flood, but one the node reads: few lost by the kernel
		}
	}
	udp.Close()
	for i := range junkConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		if _, err := c.Write(junk(i)); err != nil {
			t.Fatalf("TCP connection %d: %v", i, err)
		}
		c.Close()
	}
	sentIn := time.Since(start)

	// Every packet the kernel delivered, and every connection, is
	// counted once: wait (10 s at most) for the count to get there.
	want := uint64(junkPackets + junkConns)
	var lost uint64
	if kernelOK {
		after, _ := udpLoss(port)
		lost = after - kernelBefore
		want -= min(lost, junkPackets)
	} else {
		want = uint64(junkPackets*9/10 + junkConns) // no /proc: allow 10% loss on loopback
	}
	var dropped map[string]uint64
	var total uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		dropped, total = gossipDropped(t, a), 0
		for reason, n := range dropped {
			total += n - droppedBefore[reason]
		}
		if total >= want || time.Now().After(deadline) {
			break
		}
	}
	// ... and the peer's traffic, which is not junk, is not.
	time.Sleep(500 * time.Millisecond) // late counts would show as a double count below
	dropped, total = gossipDropped(t, a), 0
	for reason, n := range dropped {
		total += n - droppedBefore[reason]
	}
	delta := make(map[string]uint64)
	for reason, n := range dropped {
		if d := n - droppedBefore[reason]; d > 0 {
			delta[reason] = d
		}
	}
	added := strings.Split(a.log(), "\n")[linesBefore:]
	added = added[:len(added)-1] // the text after the last newline
	t.Logf("sent %d UDP packets and %d TCP connections of %d bytes in %v; kernel lost %d packets (known: %v); dropped_total +%d %v; log +%d lines (%d bytes)",
		junkPackets, junkConns, junkBytes, sentIn.Round(time.Millisecond), lost, kernelOK, total, delta, len(added), len(strings.Join(added, "\n")))
	if total < want {
		t.Errorf("caddy_rate_limit_gossip_dropped_total grew by %d, want at least %d (%d packets, %d lost by the kernel, %d connections)",
			total, want, junkPackets, lost, junkConns)
	}
	if total > junkPackets+junkConns {
		t.Errorf("caddy_rate_limit_gossip_dropped_total grew by %d, more than the %d packets and connections sent: a drop is counted twice, or the peer's traffic is dropped",
			total, junkPackets+junkConns)
	}
	if delta["label"] == 0 || delta["decrypt"] == 0 {
		t.Errorf("drops by reason %v, want label (no label) and decrypt (the label, not the key) among them", delta)
	}
	if len(added) > junkLines {
		t.Errorf("the log grew by %d lines, want at most %d; the first ones:\n%s",
			len(added), junkLines, strings.Join(added[:min(len(added), 10)], "\n"))
	}
	if len(added) <= junkLines {
		for _, line := range added {
			t.Logf("log: %s", line)
		}
	}

	// The node still serves, and still sees its peer.
	if code := a.status(t, "/api/x", "X-Api-Key", "after-junk"); code != http.StatusOK {
		t.Errorf("after the junk: %d, want 200", code)
	}
	a.waitMembers(t, 2)
	nodes[1].waitMembers(t, 2)
}

// gossipDropped is caddy_rate_limit_gossip_dropped_total by reason.
func gossipDropped(t *testing.T, p *caddyProc) map[string]uint64 {
	t.Helper()
	code, body := p.admin(t, http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	out := make(map[string]uint64)
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, `caddy_rate_limit_gossip_dropped_total{reason="`)
		if !ok {
			continue
		}
		reason, value, ok := strings.Cut(rest, `"} `)
		n, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			t.Fatalf("metric line %q", line)
		}
		out[reason] = uint64(n)
	}
	if len(out) == 0 {
		t.Fatal("no caddy_rate_limit_gossip_dropped_total in /metrics")
	}
	return out
}

// udpDrain waits, 200 ms at most, for the socket bound to 127.0.0.1:port
// to have read what it was sent (/proc/net/udp's rx_queue empty).
func udpDrain(port int) {
	local := fmt.Sprintf("0100007F:%04X", port)
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/net/udp")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) > 4 && fields[1] == local && strings.HasSuffix(fields[4], ":00000000") {
				return
			}
		}
	}
}

// udpLoss is the number of UDP packets the kernel has dropped before
// delivering them to the socket bound to 127.0.0.1:port (its receive
// buffer full: /proc/net/udp), plus those it dropped on any CPU's input
// backlog (/proc/net/softnet_stat: other traffic's too, so an upper
// bound); ok is false if they cannot be read.
func udpLoss(port int) (n uint64, ok bool) {
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port)
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 13 && fields[1] == local {
			d, err := strconv.ParseUint(fields[len(fields)-1], 10, 64)
			if err != nil {
				return 0, false
			}
			n, found = d, true
		}
	}
	if !found {
		return 0, false
	}
	soft, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(soft)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return 0, false
		}
		d, err := strconv.ParseUint(fields[1], 16, 64)
		if err != nil {
			return 0, false
		}
		n += d
	}
	return n, true
}
