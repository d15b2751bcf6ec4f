package caddymodule

// What the admin API and the dashboard (package caddymodule/admin) read of
// the running config, and what they change in it: the rules in force, by
// name, and each one's state; the running config's cluster node, geoip
// database and ASN database.

import (
	"context"
	"net/netip"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/internal/clusternode"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
	"github.com/edgebyte/edgelimit/topkeys"
)

// RuleState is a rule in force, as the admin API reads it. Reading takes
// each structure's lock only as long as one key's decision does, so it
// never holds up requests.
type RuleState struct{ e ruleEntry }

// RulesInForce returns the rules in force, sorted by name.
func RulesInForce() []RuleState {
	es := registry.list()
	out := make([]RuleState, len(es))
	for i, e := range es {
		out[i] = RuleState{e}
	}
	return out
}

// RuleInForce returns the rule in force named name.
func RuleInForce(name string) (RuleState, bool) {
	e, ok := registry.get(name)
	return RuleState{e}, ok
}

// Name is the rule's name.
func (r RuleState) Name() string { return r.e.name }

// Config is the rule as the running config gives it.
func (r RuleState) Config() ruleconfig.Rule { return r.e.rule }

// Limiter is the rule's state in this process; with store redis, that of
// its on_store_error local fallback.
func (r RuleState) Limiter() *limiter.Limiter { return r.e.lim }

// Clustered is true for a rule with scope cluster in a cluster: its keys
// are shared with the other nodes.
func (r RuleState) Clustered() bool { return r.e.clustered() }

// Requests are the rule's counts since its name came into use.
func (r RuleState) Requests() RequestCounts { return r.e.stats.snapshot() }

// Busiest counts the units each key asked for, allowed or not.
func (r RuleState) Busiest() *topkeys.Sketch { return r.e.stats.busiest }

// MostDenied counts each key's denied requests; nil before the first
// denial.
func (r RuleState) MostDenied() *topkeys.Sketch { return r.e.stats.mostDenied.Load() }

// Blocks are the keys this process blocks (block_for); nil for a rule
// that never had block_for. (A rule whose block_for was taken out keeps
// its blocks until they end.)
func (r RuleState) Blocks() *limiter.Blocks { return r.e.blocks }

// InFlight is the rule's requests in flight in this process
// (max_concurrent); nil without max_concurrent.
func (r RuleState) InFlight() *limiter.InFlight {
	if c := concurrencyIn(r.e); c != nil {
		return c.inFlight
	}
	return nil
}

// Forget forgets key in this process: its counters, its requests in
// flight, its place in the busiest keys, its block (withdrawn from the
// cluster too). It reports whether the process had state for the key.
// The other nodes of a cluster are not told to reset the key: see
// ClusterNode.
func (r RuleState) Forget(key string) bool {
	found, lifted := r.e.forget(key)
	if n := ClusterNode(); lifted && n != nil && r.e.clustered() {
		n.Sharing.WithdrawBlock(gossip.KeyHash(r.e.name), key)
	}
	return found
}

// ForgetFallback forgets key in the rule's in-process fallback and its place in
// the busiest keys, after a reset in Redis, and reports whether the
// fallback had state for it.
func (r RuleState) ForgetFallback(key string) bool {
	found := r.e.lim.Delete(key)
	r.e.stats.forget(key)
	return found
}

// Redis is the rule's state in Redis; nil for a rule without store
// redis, or while the running config has no Redis client.
func (r RuleState) Redis() *RedisState {
	if r.e.rule.Store != ruleconfig.StoreRedis {
		return nil
	}
	app := activeApp.Load()
	if app == nil || app.redis == nil {
		return nil
	}
	if st := app.redis.stores[r.e.name]; st != nil {
		return &RedisState{st}
	}
	return nil
}

// RedisState is a rule's state in Redis, for the admin API.
type RedisState struct{ st *ruleStore }

// Store is the rule's keys in Redis.
func (s *RedisState) Store() *redisstore.Store { return s.st.store }

// Timeout is the rule's timeout of a call to Redis.
func (s *RedisState) Timeout() time.Duration { return s.st.timeout }

// Exists reports whether Redis holds state for key.
func (s *RedisState) Exists(ctx context.Context, key string) (bool, error) {
	n, err := s.st.client.Exists(ctx, s.st.store.RedisKeys(key)...).Result()
	return n > 0, err
}

// Concurrent is true for a rule with max_concurrent: its leases are in
// Redis.
func (s *RedisState) Concurrent() bool { return s.st.leases != nil }

// InFlight is key's leases in force in Redis, the whole fleet's (0 for a
// rule without max_concurrent).
func (s *RedisState) InFlight(ctx context.Context, key string) (int64, error) {
	return storeInFlight(ctx, s.st, key)
}

// ClusterNode is the running config's cluster node, or nil.
func ClusterNode() *clusternode.Node {
	if app := activeApp.Load(); app != nil {
		return app.clusterNode()
	}
	return nil
}

// Country is the country the running config's geoip database gives addr;
// false without a database or for an address it does not know.
func Country(addr netip.Addr) (string, bool) {
	app := activeApp.Load()
	if app == nil || app.geoDB() == nil {
		return "", false
	}
	return app.geoDB().Country(addr)
}

// ASN is the autonomous system the running config's ASN database gives
// addr, or, for n > 0 (addr ignored), the system numbered n that it
// names; false without a database or for what it does not know.
func ASN(addr netip.Addr, n uint32) (*geo.AS, bool) {
	app := activeApp.Load()
	if app == nil || app.asn == nil {
		return nil, false
	}
	if n > 0 {
		return app.asn.load().System(n)
	}
	return app.asn.load().Lookup(addr)
}
