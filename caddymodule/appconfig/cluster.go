package appconfig

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/internal/clusternode"
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
	PartitionLocalShare = "local_share"
	PartitionFailOpen   = "fail_open"
	PartitionFailClosed = "fail_closed"
)

// Settings checks the configuration and parses it.
func (c *ClusterConfig) Settings() (clusternode.Settings, error) {
	repl := caddy.NewReplacer()
	s := clusternode.Settings{MaxKeys: c.MaxKeys, PolicyText: c.OnPartition}
	g := &s.Gossip
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
	case "", PartitionLocalShare:
		s.Policy, s.PolicyText = gossip.LocalShare, PartitionLocalShare
	case PartitionFailOpen:
		s.Policy = gossip.FailOpen
	case PartitionFailClosed:
		s.Policy = gossip.FailClosed
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
	}{g.Bind, g.Advertise, g.NodeName, g.Label, g.Join, g.SecretKeys, g.SyncInterval, s.Policy, s.MaxKeys})
	s.Print = string(print)
	return s, nil
}

// CheckSecretKey checks the i-th (from 0) key of secret_key, as a config
// load does. Errors do not quote the key.
func CheckSecretKey(i int, key string) error {
	_, err := parseSecretKey(i, key)
	return err
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
