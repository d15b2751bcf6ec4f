package gossip

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
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
	// Logger receives memberlist's logs, which are chatty. Lines that
	// tell of a packet or stream dropped are counted in Stats.Dropped and
	// sampled: the first of each reason, then at most one a second per
	// reason, saying how many were not logged. Default: discarded.
	Logger *log.Logger

	// OnOverride, if set, receives every override change another node
	// broadcast (BroadcastOverride), called as onReset is: one at a time,
	// from one goroutine. Default: they are dropped.
	OnOverride func(OverrideChange)

	// Tune, if set, may change memberlist's configuration last, after New
	// has filled it in (tests use it to make failure detection fast).
	Tune func(*memberlist.Config)
	// WrapTransport, if set, wraps the network transport (tests use it to
	// inject faults, see FaultTransport).
	WrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}

// DefaultBind is where a Cluster listens unless told otherwise.
const DefaultBind = "0.0.0.0:7946"

// DefaultSyncInterval is how often a node reports its demand unless told
// otherwise: shares follow traffic within a few intervals, and each
// report costs a packet to every other member.
const DefaultSyncInterval = 100 * time.Millisecond

// CheckBind refuses to bind beyond loopback without a secret key:
// cluster traffic would be unauthenticated and in clear. bind is
// host:port (an empty host is every address); a bind that cannot be split
// is left to the caller's own check.
func CheckBind(bind string, keys int) error {
	host, _, err := net.SplitHostPort(bind)
	if err != nil || keys > 0 || isLoopback(host) {
		return nil
	}
	return errors.New("a secret key is required to bind beyond loopback, or cluster traffic would be unauthenticated and in clear")
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

// isLoopback is true for a loopback IP address; a name is not one, as it
// may resolve to anything.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
