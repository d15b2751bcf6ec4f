package admin

import (
	"cmp"
	"slices"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/internal/clusternode"
)

// clusterView is GET /rate_limit/cluster.
type clusterView struct {
	Enabled bool `json:"enabled"`

	Node         string       `json:"node,omitempty"`
	Addr         string       `json:"addr,omitempty"`
	SyncInterval string       `json:"sync_interval,omitempty"`
	OnPartition  string       `json:"on_partition,omitempty"`
	Members      []memberView `json:"members"`
	Size         int          `json:"size,omitempty"`     // nodes the limits are divided between: alive, or dead for less than 5 minutes
	Live         int          `json:"live,omitempty"`     // nodes heard from within the share TTL, this one included
	Minority     bool         `json:"minority,omitempty"` // on_partition applies
	ColdShare    float64      `json:"cold_share,omitempty"`
	TrackedKeys  int          `json:"tracked_keys"`
	Untracked    uint64       `json:"untracked_keys_total"`       // keys left at the cold share: max_keys reached
	UnknownRules uint64       `json:"unknown_rule_entries_total"` // report entries for rules not here: rule names differ between nodes
	Shares       []shareView  `json:"shares"`
	Gossip       *gossipView  `json:"gossip,omitempty"`
}

type memberView struct {
	Name  string     `json:"name"`
	Addr  string     `json:"addr"`
	State string     `json:"state"`
	Self  bool       `json:"self,omitempty"`
	Since *time.Time `json:"since,omitempty"`
}

// shareView is a hot key's share on this node.
type shareView struct {
	Rule  string  `json:"rule"`
	Key   string  `json:"key,omitempty"` // empty: hot elsewhere, not seen here
	Share float64 `json:"share"`
	Hot   bool    `json:"hot"` // near its share here: in this node's reports
}

type gossipView struct {
	MessagesSent     uint64            `json:"messages_sent"`
	BytesSent        uint64            `json:"bytes_sent"`
	SendErrors       uint64            `json:"send_errors"`
	MessagesReceived uint64            `json:"messages_received"`
	BytesReceived    uint64            `json:"bytes_received"`
	Dropped          map[string]uint64 `json:"dropped"`
	JoinAttempts     uint64            `json:"join_attempts"`
	JoinFailures     uint64            `json:"join_failures"`
}

// maxSharesShown bounds the shares GET /rate_limit/cluster lists.
const maxSharesShown = 100

// describeCluster is the cluster as the running config's node sees it.
func describeCluster() clusterView {
	n := caddymodule.ClusterNode()
	if n == nil {
		return clusterView{Members: []memberView{}, Shares: []shareView{}}
	}
	now := time.Now()
	members := n.Cluster.Members()
	st := n.Sharing.Stats(now)
	v := clusterView{
		Enabled:      true,
		Node:         n.Cluster.Name(),
		Addr:         n.Cluster.Addr(),
		SyncInterval: n.Cluster.SyncInterval().String(),
		OnPartition:  n.Policy(),
		Members:      []memberView{},
		Size:         clusternode.Size(members, now),
		Live:         st.Live,
		Minority:     st.Minority,
		ColdShare:    st.ColdShare,
		TrackedKeys:  st.Tracked,
		Untracked:    st.Full,
		UnknownRules: st.UnknownRules,
		Shares:       []shareView{},
	}
	for _, m := range members {
		mv := memberView{Name: m.Name, Addr: m.Addr, State: m.State, Self: m.Self}
		if !m.Since.IsZero() {
			mv.Since = &m.Since
		}
		v.Members = append(v.Members, mv)
	}
	names := make(map[uint64]string)
	for _, e := range caddymodule.RulesInForce() {
		names[gossip.KeyHash(e.Name())] = e.Name()
	}
	shares := n.Sharing.Shares(0)
	slices.SortFunc(shares, func(a, b gossip.KeyShare) int { return cmp.Compare(b.Share, a.Share) })
	for _, s := range shares[:min(len(shares), maxSharesShown)] {
		v.Shares = append(v.Shares, shareView{Rule: names[s.Rule], Key: s.Key, Share: s.Share, Hot: s.Hot})
	}
	gs := n.Cluster.Stats()
	v.Gossip = &gossipView{
		MessagesSent: gs.MessagesSent, BytesSent: gs.BytesSent, SendErrors: gs.SendErrors,
		MessagesReceived: gs.MessagesReceived, BytesReceived: gs.BytesReceived,
		Dropped: gs.Dropped, JoinAttempts: gs.JoinAttempts, JoinFailures: gs.JoinFailures,
	}
	return v
}
