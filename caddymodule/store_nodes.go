package caddymodule

// The fleet behind a Redis store: every process with the same Redis and
// key_prefix counts itself in Redis (redisstore.Fleet), so that when
// Redis cannot decide, a rule with on_store_error local enforces this
// node's share of its limits (1/N of each, N the nodes last seen), and
// the fleet admits about the limit in total instead of N times it.

import (
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/redisstore"
)

// fleet is the fleet of the rule's Redis client and key prefix, or nil
// if none runs.
func (st *ruleStore) fleet() *redisstore.Fleet {
	if st == nil {
		return nil
	}
	return redispool.LookupFleet(st.fleetKey)
}

// fallbackShare is the part of its limits a rule with store redis and
// on_store_error local enforces on this node when Redis cannot decide:
// 1/N, N the nodes sharing the Redis and key prefix as last seen through
// Redis (this one included). With one node, or none seen yet, 1: the
// whole limit. Every node falling back at once thus admits about the
// limit in total, not N times it. Multiply it into the scale of the
// in-process decision (limiter.ScaledCount rounds each count down, at
// least 1) and of its refund.
func (st *ruleStore) fallbackShare() float64 {
	if f := st.fleet(); f != nil {
		return 1 / float64(f.Nodes())
	}
	return 1
}

// storeNodes is the number of nodes sharing the app's Redis and key
// prefix, as last seen through Redis; 1 before the first beat.
func (a *App) storeNodes() float64 {
	if a.redis == nil {
		return 1
	}
	if f := redispool.LookupFleet(a.redis.fleetKey()); f != nil {
		return float64(f.Nodes())
	}
	return 1
}
