package caddymodule

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/internal/clusternode"
	"github.com/edgebyte/edgelimit/limiter"
)

// resetLocal forgets a key that another node's admin API reset.
func resetLocal(rule, key string) {
	if e, ok := registry.get(rule); ok {
		e.forget(key)
	}
}

// clusterUse is an app's cluster: its settings and the node it uses.
type clusterUse struct {
	settings clusternode.Settings
	node     atomic.Pointer[clusternode.Node] // set at Provision if one runs, else at Start
}

// provisionCluster checks cfg and, on a reload that keeps the cluster
// block, takes the running node at once (it serves the new handlers from
// their first request). It starts none: caddy validate binds no port.
func provisionCluster(cfg *appconfig.ClusterConfig) (*clusterUse, error) {
	settings, err := cfg.Settings()
	if err != nil {
		return nil, err
	}
	settings.OnBlock = blockFromCluster              // blocks.go
	settings.Gossip.OnOverride = overrideFromCluster // overrides_sync.go
	u := &clusterUse{settings: settings}
	if n := clusternode.Existing(settings); n != nil {
		u.node.Store(n)
	}
	return u, nil
}

// start starts the node if Provision found none running, and gives it the
// rules.
func (u *clusterUse) start(logger *zap.Logger, rules []gossip.Rule) error {
	if u.node.Load() != nil {
		return nil
	}
	n, err := clusternode.Acquire(u.settings, logger, resetLocal)
	if err != nil {
		return err
	}
	u.node.Store(n)
	n.Sharing.SetRules(rules)
	return nil
}

// cleanup releases the node.
func (u *clusterUse) cleanup() {
	if n := u.node.Swap(nil); n != nil {
		clusternode.Release(n)
	}
}

// sharing is the quota sharing of the cluster node in use, or nil: no
// cluster, or its node not started yet (the rules then limit alone).
func (a *App) sharing() *gossip.Sharing {
	if n := a.clusterNode(); n != nil {
		return n.Sharing
	}
	return nil
}

// clusterNode is the cluster node in use, or nil.
func (a *App) clusterNode() *clusternode.Node {
	if a.cluster == nil {
		return nil
	}
	return a.cluster.node.Load()
}

// sharedRules are this config's rules with scope cluster, for the sharing.
func (a *App) sharedRules() []gossip.Rule {
	var out []gossip.Rule
	for _, p := range a.pending {
		if !p.cfg.Shares {
			continue
		}
		if c, ok := concurrentRule(p.name); ok && p.rule.MaxConcurrent > 0 {
			out = append(out, c)
		}
		if p.rule.ConcurrentOnly() {
			continue
		}
		lim := p.lim
		r := gossip.Rule{
			Name:   p.name,
			Window: p.rule.Limits[0].Span(), // a calendar period's: its rate is Count per span
			Demand: func(key string) uint64 {
				d, _ := lim.TakeDemand(key)
				return d
			},
		}
		switch limiter.Algorithm(p.rule.Algorithm) {
		case limiter.TokenBucket, limiter.LeakyBucket:
		default: // a window: its count does not move with a share
			r.Used = func(key string, now time.Time) uint64 { return uint64(max(lim.UsedAt(key, now), 0)) }
		}
		out = append(out, r)
	}
	return out
}
