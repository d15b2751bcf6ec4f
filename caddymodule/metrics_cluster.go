package caddymodule

import (
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/prometheus/client_golang/prometheus"
)

// Cluster metrics: only when a cluster is configured.
var (
	descClusterMembers = newDesc("caddy_rate_limit_cluster_members",
		"Cluster members this node sees alive, itself included.")
	descGossipBytes = newDesc("caddy_rate_limit_gossip_bytes_total",
		"Bytes of cluster messages (reports, resets) this node sent or received, before memberlist's framing and encryption; by direction: sent, received.",
		"direction")
	descGossipDropped = newDesc("caddy_rate_limit_gossip_dropped_total",
		"Packets, connections and cluster messages this node received on its gossip port and dropped, by reason: label (without the cluster's label), decrypt (not sent with a key of the cluster), decode, empty (a connection closed before its first byte), stream_oversized (a connection that claims or sends more than 256 KiB), stream_excess (a connection past 32 open at once), stream_timeout (a connection that has not sent its message in 5 s), version, type, truncated, too_large, trailing (malformed), overflow (arriving faster than handled), other.",
		"reason")
)

// collectCluster sends the cluster metrics, if there is a cluster.
func collectCluster(ch chan<- prometheus.Metric) {
	n := ClusterNode()
	if n == nil {
		return
	}
	alive := 0
	for _, m := range n.Cluster.Members() {
		if m.State == gossip.StateAlive {
			alive++
		}
	}
	ch <- gauge(descClusterMembers, float64(alive))
	st := n.Cluster.Stats()
	ch <- counter(descGossipBytes, float64(st.BytesSent), "sent")
	ch <- counter(descGossipBytes, float64(st.BytesReceived), "received")
	for reason, count := range st.Dropped {
		ch <- counter(descGossipDropped, float64(count), reason)
	}
}
