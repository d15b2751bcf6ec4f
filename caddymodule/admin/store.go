package admin

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/limiter"
)

// The admin API's key routes for rules with store redis: a key's state is
// read from Redis (Store.Peek) and reset there (Store.Reset), in the same
// JSON as a local key's. Redis down answers 503.

// adminStoreTimeout bounds the admin API's calls to Redis: an operator can
// wait longer than a request.
const adminStoreTimeout = 2 * time.Second

// serveStoreKey answers a key's state in Redis.
func serveStoreKey(w http.ResponseWriter, e caddymodule.RuleState, st *caddymodule.RedisState, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(adminStoreTimeout, st.Timeout()))
	defer cancel()
	found, err := st.Exists(ctx, key)
	inFlight, lerr := st.InFlight(ctx, key)
	if err = cmp.Or(err, lerr); err != nil {
		return apiError(http.StatusServiceUnavailable, "rule %q: reading redis: %v", e.Name(), err)
	}
	if !found && inFlight == 0 {
		return apiError(http.StatusNotFound, "rule %q has no state in redis for key %q (never seen, or idle and expired)", e.Name(), key)
	}
	now, err := st.Store().Peek(ctx, key, 0)
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "rule %q: reading redis: %v", e.Name(), err)
	}
	next, err := st.Store().Peek(ctx, key, 1)
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "rule %q: reading redis: %v", e.Name(), err)
	}
	v := keyView{Rule: e.Name(), Scale: 1}
	v.Key, v.Escaped = jsonKey(key)
	v = keyViewOf(v, &now, &next)
	if err := withStoreBlock(ctx, &v, st, key); err != nil {
		return apiError(http.StatusServiceUnavailable, "rule %q: reading redis: %v", e.Name(), err)
	}
	storeKeyInFlight(&v, e, st, inFlight)
	return writeJSON(w, v)
}

// resetStoreKey forgets a key in Redis, and in the rule's in-process
// fallback limiter.
func resetStoreKey(w http.ResponseWriter, e caddymodule.RuleState, st *caddymodule.RedisState, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(adminStoreTimeout, st.Timeout()))
	defer cancel()
	found, err := st.Exists(ctx, key)
	if err == nil {
		err = st.Store().Reset(ctx, key)
	}
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "rule %q: resetting in redis: %v", e.Name(), err)
	}
	local := e.ForgetFallback(key)
	if !found && !local {
		return apiError(http.StatusNotFound, "rule %q has no state for key %q", e.Name(), key)
	}
	return writeJSON(w, resetView{Rule: e.Name(), Key: key, Reset: true})
}

// keyViewOf fills v from a key's state now (a peek of cost 0) and what a
// request of cost 1 would get (next).
func keyViewOf(v keyView, now, next *limiter.Decision) keyView {
	for i := 0; i < now.Len; i++ {
		q := now.Quotas[i]
		v.Limits = append(v.Limits, keyLimitView{
			Limit:         q.Limit,
			WindowSeconds: q.Window.Seconds(),
			Used:          max(0, q.Limit-q.Remaining),
			Remaining:     q.Remaining,
			ResetSeconds:  q.Reset.Seconds(),
		})
	}
	v.Allowed = next.Allowed
	v.RetryAfterSeconds = next.RetryAfter.Seconds()
	return v
}

// storeKeyInFlight sets a key view's requests in flight from Redis.
func storeKeyInFlight(v *keyView, e caddymodule.RuleState, st *caddymodule.RedisState, n int64) {
	if st.Concurrent() {
		setInFlight(v, e, n)
	}
}
