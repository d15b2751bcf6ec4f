package caddymodule

import "github.com/prometheus/client_golang/prometheus"

// The metrics of the snapshots (persist.go), exported unless persist off.
var (
	descSnapshotWrites = newDesc("caddy_rate_limit_snapshot_writes_total",
		"Writes of every rule's snapshot to Caddy's storage that succeeded whole (one every persist_interval, and one at a graceful stop).")
	descSnapshotErrors = newDesc("caddy_rate_limit_snapshot_errors_total",
		"Objects of the rules' snapshots that Caddy's storage failed to store (full disk, storage down): the rule's next write is a full snapshot; requests are not affected.")
	descSnapshotKeys = newDesc("caddy_rate_limit_snapshot_keys_written_total",
		"Keys written in the rules' snapshots: every key in a full snapshot, the keys changed since the write before in a delta.")
	descSnapshotBytes = newDesc("caddy_rate_limit_snapshot_bytes_written_total",
		"Bytes of the rules' snapshots stored.")
	descSnapshotLast = newDesc("caddy_rate_limit_snapshot_last_success_timestamp_seconds",
		"When the last write of every rule's snapshot succeeded whole (Unix seconds); 0 before the first.")
	descSnapshotDuration = newDesc("caddy_rate_limit_snapshot_duration_seconds",
		"How long the last write of the rules' snapshots took (encoding and storing).")
)

// describePersist sends the snapshots' metric descriptions.
func describePersist(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSnapshotWrites, descSnapshotErrors, descSnapshotKeys,
		descSnapshotBytes, descSnapshotLast, descSnapshotDuration} {
		ch <- d
	}
}

// collectPersist sends the snapshots' metrics, if the config in force
// persists.
func collectPersist(ch chan<- prometheus.Metric) {
	s := Snapshots()
	if !s.Enabled {
		return
	}
	ps := snapshots
	ch <- counter(descSnapshotWrites, float64(s.Writes))
	ch <- counter(descSnapshotErrors, float64(s.Errors))
	ch <- counter(descSnapshotKeys, float64(s.KeysWritten))
	ch <- counter(descSnapshotBytes, float64(s.BytesWritten))
	last := 0.0
	if t := ps.lastSuccess.Load(); t != 0 {
		last = float64(t) / 1e9
	}
	ch <- gauge(descSnapshotLast, last)
	ch <- gauge(descSnapshotDuration, float64(ps.lastDuration.Load())/1e9)
}
