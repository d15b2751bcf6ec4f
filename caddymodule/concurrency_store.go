package caddymodule

// max_concurrent with store redis: a lease in Redis per request in flight
// (redisstore.Leases), renewed while it runs, so N holds for every node
// sharing the Redis, and a crashed node's leases free themselves after
// lease_timeout.
//
// While Redis is away the on_store_error local fallback counts the key's
// requests in flight on this node (the rule's limiter.InFlight) against
// its share of N: so every request of the rule holds a place there, a
// leased one too (uncapped: Redis decided it), and the fallback counts
// the leases this node holds. A request the fallback admitted holds no
// lease, also once Redis answers again: it holds a place in the rule's
// unleased count, and a lease is taken against N less the key's
// unleased requests, so that they count until they end.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
)

// heldLease is a request's lease in a rule's max_concurrent on Redis.
type heldLease struct {
	lease *redisstore.Lease
	st    *ruleStore
}

// release ends the lease within the store's timeout; if Redis cannot be
// reached, the lease expires on its own (lease_timeout).
func (h heldLease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), h.st.timeout)
	defer cancel()
	if err := h.lease.Release(ctx); err != nil {
		h.st.failed("release", err)
	}
}

// newRuleLeases makes the leases of a rule with store redis and
// max_concurrent, in the rule's key prefix, through its store's breaker.
func newRuleLeases(r *rule, u *redisUse, s *redisstore.Store) (*redisstore.Leases, error) {
	if r.MaxConcurrent == 0 {
		return nil, nil
	}
	return redisstore.NewLeases(u.client.Redis, redisstore.LeaseConfig{
		Max:       int64(r.MaxConcurrent),
		Timeout:   time.Duration(r.LeaseTimeout),
		KeyPrefix: u.settings.Prefix + redisstore.Escape(r.Name) + ":",
		Breaker:   s.Breaker(),
	})
}

// closeLeases stops the renewers of the config's leases once their
// leases are released: a request still in flight from this config (a
// download across a reload) keeps its lease renewed until it ends.
func (u *redisUse) closeLeases() {
	for _, st := range u.stores {
		if st.leases != nil {
			st.leases.Close()
		}
	}
}

// admitLease takes a lease for the request on Redis, of the key's n (N
// after the tier's and the country's factors). handled is false when
// Redis failed and on_store_error local applies: the in-process count
// decides, at this node's share of n.
func (ru *rule) admitLease(q *request, f facts, n int64, slots *inFlightSlots, hdr http.Header) (out admitOutcome, handled bool) {
	st, c := ru.store, ru.conc
	unleased := c.unleased.InFlightOf(f.key)
	ctx, cancel := context.WithTimeout(q.r.Context(), st.timeout)
	lease, inFlight, err := st.leases.AcquireMax(ctx, f.key, n-unleased)
	cancel()
	switch {
	case err == nil && lease == nil:
		if ru.Shadow {
			return concShadow, true
		}
		ru.conc.refused.Add(1)
		return concRefused, true
	case err == nil:
		st.ok()
		slots.leases = append(slots.leases, heldLease{lease, st})
		c.holdUncapped(c.inFlight, f.key, slots)
		ru.setConcurrentHeaders(hdr, n, n-inFlight-unleased)
		return concAdmitted, true
	case q.r.Context().Err() != nil && errors.Is(err, context.Canceled):
		return concClientGone, true
	}
	st.failed("lease", err)
	ru.stats.fallbacks[modeIndex(st.mode)].Add(1)
	switch st.mode {
	case ruleconfig.StoreErrorFailOpen:
		return concAdmitted, true // unlimited by the rule, without its headers
	case ruleconfig.StoreErrorFailClosed:
		return concUnavailable, true
	}
	return 0, false
}

// holdUncapped takes a place of key in counts for the request, whatever
// the key holds already (the decision was made elsewhere), kept in
// slots; with the table of keys full, none.
func (c *concurrency) holdUncapped(counts *limiter.InFlight, key string, slots *inFlightSlots) {
	if slot, ok, _ := counts.AcquireScaled(key, math.MaxInt64); ok {
		slots.add(slot)
	}
}

// storeInFlight is key's leases in force in Redis, the whole fleet's (0
// for a rule without max_concurrent).
func storeInFlight(ctx context.Context, st *ruleStore, key string) (int64, error) {
	if st.leases == nil {
		return 0, nil
	}
	return st.leases.InFlight(ctx, key)
}
