package caddymodule

// How a change of an override reaches the rule's other holders of state:
// the cluster's other nodes (a message over TCP to every live member at
// once, gossip.BroadcastOverride; a node that sees another join, or come
// back, asks it for its overrides, overridesOnJoin, and is sent them,
// sendOverrides), or for a rule with store redis, Redis
// (redisstore's overrides hash), which every node using it reads every
// overrideSyncInterval. Either way changes merge by their version (the
// time set: of two changes of a key the later wins, so a DELETE is not
// undone by an older PUT told later).

import (
	"context"
	"fmt"
	"sync/atomic"
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
	if r.e.rule.Store == ruleconfig.StoreRedis {
		r.storeOverride(o)
		return
	}
	n := ClusterNode()
	if n == nil {
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
// OnOverride), or its request for this node's overrides: a change is merged into the rule of that name, if it has a later
// version than the one held. A change that fails to decode is dropped
// (droppedOverride).
func overrideFromCluster(c gossip.OverrideChange) {
	if c.Rule == "" { // a node asks for this node's overrides
		go sendOverrides(string(c.Change)) // not on gossip's one goroutine
		return
	}
	e, ok := registry.get(c.Rule)
	if !ok {
		return
	}
	es, err := limiter.ReadOverrides(c.Change)
	if err != nil {
		droppedOverride(c.Rule, "cluster", err)
		return
	}
	e.overrides.Merge(es)
}

// overridesOnJoin asks a member that joined, or came back (gossip's
// OnJoin), for its overrides: it answers with sendOverrides. A node
// starting meets the others before its app holds it: it waits for that,
// up to joinAskWait. A failure is logged (a warning): this node learns
// later changes still.
func overridesOnJoin(node string) {
	n := ClusterNode()
	for waited := time.Duration(0); n == nil && waited < joinAskWait; waited += joinAskWait / 50 {
		time.Sleep(joinAskWait / 50)
		n = ClusterNode()
	}
	if n == nil {
		return
	}
	if _, err := n.Cluster.AskOverrides(node); err != nil {
		warnOverridesNotSent(node, err)
	}
}

// joinAskWait bounds how long overridesOnJoin waits for the node to be
// the running config's.
const joinAskWait = 5 * time.Second

// warnOverridesNotSent logs that the overrides could not be asked of node
// or sent to it.
func warnOverridesNotSent(node string, err error) {
	if app := activeApp.Load(); app != nil {
		app.logger.Warn("rate limit overrides not exchanged with a joining node", zap.String("node", node), zap.Error(err))
	}
}

// sendOverrides sends every override (removals too) of the rules not
// kept in Redis to the member that asked for them, in messages of at most
// gossip.MaxKeyBytes, one after another. A failure is logged (a
// warning).
func sendOverrides(node string) {
	n := ClusterNode()
	if n == nil {
		return
	}
	now := time.Now()
	var changes []gossip.OverrideChange
	for _, e := range registry.list() {
		if e.rule.Store == ruleconfig.StoreRedis || e.overrides == nil {
			continue
		}
		for _, batch := range overrideBatches(e.overrides.All(), gossip.MaxKeyBytes) {
			changes = append(changes, gossip.OverrideChange{Rule: e.name, Change: limiter.AppendOverrides(nil, batch, now)})
		}
	}
	if len(changes) == 0 {
		return
	}
	if _, err := n.Cluster.SendOverrides(node, changes); err != nil {
		warnOverridesNotSent(node, err)
	}
}

// overrideBatches splits es into batches whose encoding (AppendOverrides)
// takes at most max bytes; an entry that alone would not fit is left out.
func overrideBatches(es []limiter.Override, max int) [][]limiter.Override {
	const frame, fixed = 32, 40 // a snapshot's frame and count; an entry's fixed fields, with room
	var out [][]limiter.Override
	var batch []limiter.Override
	size := frame
	for _, e := range es {
		n := fixed + len(e.Key) + len(e.SetBy)
		if frame+n > max {
			continue
		}
		if size+n > max {
			out, batch, size = append(out, batch), nil, frame
		}
		batch, size = append(batch, e), size+n
	}
	if len(batch) > 0 {
		out = append(out, batch)
	}
	return out
}

// overridesDropped counts the override changes dropped for not decoding
// (from the cluster, or fields of Redis's hash), for droppedOverride.
var overridesDropped, overridesDropLogged atomic.Int64 // a count; Unix ns of the last line

// droppedOverride counts a change of rule's overrides from "cluster" or
// "redis" that did not decode, and warns at most once a minute with the
// count so far.
func droppedOverride(rule, from string, err error) {
	n := overridesDropped.Add(1)
	if !onceEvery(&overridesDropLogged, time.Minute) {
		return
	}
	if app := activeApp.Load(); app != nil {
		app.logger.Warn("rate limit override change dropped: it does not decode", zap.String("rule", rule), zap.String("from", from), zap.Error(err), zap.Int64("dropped", n))
	}
}

// overrideSyncInterval is how often a node reads the overrides of its
// rules with store redis from Redis.
const overrideSyncInterval = time.Second

// storeOverride writes a change of an override of a rule with store
// redis to Redis; a failure is logged (a warning): the change is in force
// here, and the other nodes do not see it.
func (r RuleState) storeOverride(o limiter.Override) {
	st := r.Redis()
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), st.st.timeout)
	defer cancel()
	if _, err := st.st.store.PutOverride(ctx, o); err != nil {
		if app := activeApp.Load(); app != nil {
			app.logger.Warn("rate limit override not written to Redis: in force on this node only", zap.String("rule", r.e.name), zap.String("key", shownKey(o.Key)), zap.Error(err))
		}
	}
}

// syncOverrides reads the overrides of every rule with store redis from
// Redis into the rule's, and deletes from Redis those that have ended
// (expired settings, removals past limiter.OverrideTombstone). A failure
// waits for the next round.
func (u *redisUse) syncOverrides(now time.Time) {
	for name, st := range u.stores {
		e, ok := registry.get(name)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), st.timeout)
		es, bad, err := st.store.Overrides(ctx)
		if bad > 0 {
			droppedOverride(name, "redis", fmt.Errorf("%d fields of the overrides' hash do not decode", bad))
		}
		if err == nil {
			e.overrides.Merge(es)
			var ended []limiter.Override
			for _, o := range es {
				if o.Removed && now.Sub(o.SetAt) > limiter.OverrideTombstone || !o.Removed && !o.Expires.IsZero() && !now.Before(o.Expires) {
					ended = append(ended, o)
				}
			}
			st.store.PruneOverrides(ctx, ended)
		}
		cancel()
	}
}
