package caddymodule

import (
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/prometheus/client_golang/prometheus"
)

// The metrics of abuse response (block_for, cost_header), per rule that
// uses it.
var (
	descBlocks = newDesc("caddy_rate_limit_blocks_total",
		"Blocks a rule with block_for started on this node (store local: blocks learnt from other nodes of a cluster are not counted; store redis: blocks Redis started on this node's decisions, and those the on_store_error local fallback started while Redis was away).",
		"rule")
	descBlockedKeys = newDesc("caddy_rate_limit_blocked_keys",
		"Keys a rule with block_for and store local blocks now on this node (its own blocks and those learnt from the cluster). Not exported for store redis (listing Redis's blocks scans its keys: see GET /rate_limit/rules/{rule}/blocked).",
		"rule")
	descCostHeaderErrors = newDesc("caddy_rate_limit_cost_header_errors_total",
		"Responses of a rule with cost_header whose header was absent or not a whole number ≥ 0: each took 1 unit.",
		"rule")
)

func describeAbuse(ch chan<- *prometheus.Desc) {
	ch <- descBlocks
	ch <- descBlockedKeys
	ch <- descCostHeaderErrors
}

// collectAbuse sends r's abuse metrics, if it has block_for or cost_header.
func collectAbuse(ch chan<- prometheus.Metric, r ruleEntry) {
	if len(r.rule.BlockFor) > 0 && !r.rule.Shadow {
		started := r.stats.abuse.redisBlocks.Load()
		if r.blocks != nil {
			started += r.blocks.Started()
		}
		if r.blocks != nil && r.rule.Store != ruleconfig.StoreRedis {
			ch <- gauge(descBlockedKeys, float64(r.blocks.BlockedCountAt(time.Now())), r.name)
		}
		ch <- counter(descBlocks, float64(started), r.name)
	}
	if r.rule.CostHeader != "" {
		ch <- counter(descCostHeaderErrors, float64(r.stats.abuse.costHeaderErrors.Load()), r.name)
	}
}
