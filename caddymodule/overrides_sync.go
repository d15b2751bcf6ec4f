package caddymodule

// How a change of an override reaches the rule's other holders of state:
// the cluster's other nodes (a message over TCP to every live member at
// once, gossip.BroadcastOverride), which merge it by its version (the
// time it was set: of two changes of a key the later wins, so a DELETE
// is not undone by an older PUT told later).

import (
	"time"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// shareOverride tells the rule's other holders of state of a change of an
// override made here: the cluster's other nodes, for a rule not kept in
// Redis. A node it cannot reach is logged (a warning); the change is in
// force here.
func (r RuleState) shareOverride(o limiter.Override) {
	n := ClusterNode()
	if n == nil || r.e.rule.Store == ruleconfig.StoreRedis {
		return
	}
	change := limiter.AppendOverrides(nil, []limiter.Override{o}, time.Now())
	if err := n.Cluster.BroadcastOverride(gossip.OverrideChange{Rule: r.e.name, Change: change}); err != nil {
		if app := activeApp.Load(); app != nil {
			app.logger.Warn("rate limit override not told to every node", zap.String("rule", r.e.name), zap.String("key", shownKey(o.Key)), zap.Error(err))
		}
	}
}

// overrideFromCluster takes a change another node made (gossip's
// OnOverride): merged into the rule of that name, if it has a later
// version than the one held. A change that fails to decode is dropped,
// with a warning (a node that authenticated with the cluster's key sent
// it).
func overrideFromCluster(c gossip.OverrideChange) {
	e, ok := registry.get(c.Rule)
	if !ok {
		return
	}
	es, err := limiter.ReadOverrides(c.Change)
	if err != nil {
		if app := activeApp.Load(); app != nil {
			app.logger.Warn("rate limit override from the cluster dropped", zap.String("rule", c.Rule), zap.Error(err))
		}
		return
	}
	e.overrides.Merge(es)
}
