package caddymodule

// The Redis store: rules with `store redis` keep their state in one Redis
// shared by every node, through package redisstore, and fall back on
// their in-process limiter (or fail open, or closed) when it is away.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
)

// overLimitCacheKeys is the size of each rule's over-limit cache.
const overLimitCacheKeys = 65536

// storeModes are the values of on_store_error, in the order of
// ruleStats.fallbacks.
var storeModes = [...]string{ruleconfig.StoreErrorLocal, ruleconfig.StoreErrorFailOpen, ruleconfig.StoreErrorFailClosed}

// modeIndex is mode's index in storeModes ("" is local).
func modeIndex(mode string) int {
	for i, m := range storeModes {
		if m == mode {
			return i
		}
	}
	return 0
}

// ruleStore is a rule's state in Redis, with what the request path needs
// around it: the deadline, the on_store_error mode, and a log that says
// when Redis fails and when it is back, without a line per request.
type ruleStore struct {
	store   *redisstore.Store
	client  redis.UniversalClient // for the admin API
	timeout time.Duration
	probe   time.Duration // the least time between two failure log lines
	rule    string
	mode    string
	logger  *zap.Logger

	fleetKey redispool.FleetKey // the nodes sharing the Redis and key prefix: on_store_error local takes 1/N
	leases   *redisstore.Leases // max_concurrent's (concurrency_store.go); nil without

	down       atomic.Bool  // the last call failed
	lastLog    atomic.Int64 // Unix ns of the last failure logged
	suppressed atomic.Uint64
}

// redisUse is an app's Redis store: the client (shared through
// redisClients), the rules' state in it and the fleet heartbeat.
type redisUse struct {
	settings redispool.Settings    // StoreConfig.Redis, parsed
	client   *redispool.Client     // connects at its first call, not at Provision
	stores   map[string]*ruleStore // by rule name: the rules with store redis; set while provisioning
	fleet    *redispool.Heartbeat  // acquired at Start, released at Cleanup
}

// provisionRedis checks cfg and takes its client.
func provisionRedis(cfg *appconfig.StoreConfig) (*redisUse, error) {
	if cfg.Redis == nil {
		return nil, fmt.Errorf("store: no redis block (the one store there is)")
	}
	settings, err := cfg.Redis.Settings()
	if err != nil {
		return nil, err
	}
	return &redisUse{settings: settings, client: redispool.Acquire(settings)}, nil
}

// fleetKey is the fleet this node counts itself in: the client and the
// key prefix.
func (u *redisUse) fleetKey() redispool.FleetKey {
	return redispool.FleetKey{Client: u.client.Redis, Prefix: u.settings.Prefix}
}

// start counts this node in the fleet. Not at Provision: caddy validate
// must not count as a node.
func (u *redisUse) start(logger *zap.Logger) {
	if u.fleet == nil {
		u.fleet = redispool.AcquireFleet(u.fleetKey(), logger)
	}
}

// cleanup leaves the fleet and releases the client.
func (u *redisUse) cleanup() {
	u.closeLeases()
	redispool.ReleaseFleet(u.fleet)
	u.fleet = nil
	if u.client != nil {
		redispool.Release(u.client)
		u.client = nil
	}
}

// storeFor returns the Store of a rule with store redis: one per rule
// name in a config. Its keys start with the app's prefix, the rule's name
// (escaped by redisstore.Escape) and ':'.
func (a *App) storeFor(r *rule) (*ruleStore, error) {
	u := a.redis
	if st, ok := u.stores[r.Name]; ok {
		return st, nil
	}
	cfg := r.LimiterConfig()
	rc := redisstore.Config{
		Algorithm:     cfg.Algorithm,
		Limits:        cfg.Limits,
		Burst:         cfg.Burst,
		MaxDelay:      cfg.MaxDelay,
		Periods:       cfg.Periods,
		Location:      cfg.Location,
		KeyPrefix:     u.settings.Prefix + redisstore.Escape(r.Name) + ":",
		ProbeInterval: u.settings.Probe,
		Coalesce:      u.settings.Coalesce,
		Batcher:       u.client.Batcher(u.settings),
		Counters:      &r.stats.store, // kept by the rule's name across reloads
	}
	if !r.Shadow { // a shadow rule blocks no one
		rc.BlockFor, rc.BlockReset = r.BlockDurations(), time.Duration(r.BlockReset)
	}
	if u.settings.OverLimit {
		rc.OverLimitCacheKeys = overLimitCacheKeys
	}
	s, err := redisstore.New(u.client.Redis, rc)
	if err != nil {
		return nil, err
	}
	mode := r.OnStoreError
	if mode == "" {
		mode = ruleconfig.StoreErrorLocal
	}
	st := &ruleStore{
		store: s, client: u.client.Redis, timeout: u.settings.Timeout, probe: u.settings.Probe,
		rule: r.Name, mode: mode, logger: a.logger, fleetKey: u.fleetKey(),
	}
	if st.leases, err = newRuleLeases(r, u, s); err != nil {
		return nil, err
	}
	if u.stores == nil {
		u.stores = make(map[string]*ruleStore)
	}
	u.stores[r.Name] = st
	return st, nil
}

// storeOutcome is where a decision of a rule with store redis came from.
type storeOutcome int

const (
	fromStore    storeOutcome = iota // Redis decided
	fromLocal                        // Redis failed; the in-process limiter decided
	failedOpen                       // Redis failed; the request passes, unlimited by the rule
	failedClosed                     // Redis failed; the request is refused (503)
	clientGone                       // the client went away during the call
)

// decideStore decides a request on Redis at scale (a tier's, a
// country's), within the store's timeout; on failure it applies the
// rule's on_store_error (the decision is then the in-process one, with
// no Block and At now). It returns the scale of the decision: with the
// in-process fallback, scale times this node's share of the fleet, for a
// refund.
func (ru *rule) decideStore(ctx context.Context, key string, now time.Time, cost int64, scale float64) (redisstore.Decision, storeOutcome, float64) {
	st := ru.store
	callCtx, cancel := context.WithTimeout(ctx, st.timeout)
	sd, err := st.store.Decide(callCtx, key, cost, scale)
	cancel()
	if err == nil {
		st.ok()
		return sd, fromStore, scale
	}
	d, from, local := ru.storeFailed(ctx, err, "allow", key, now, cost, scale)
	return redisstore.Decision{Decision: d, At: now}, from, local
}

// storeFailed applies on_store_error to a call that failed with err:
// the in-process limiter decides cost units (peek: a check, taking
// nothing), or the request passes, or is refused.
func (ru *rule) storeFailed(ctx context.Context, err error, call, key string, now time.Time, cost int64, scale float64) (limiter.Decision, storeOutcome, float64) {
	st := ru.store
	var d limiter.Decision
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return d, clientGone, scale
	}
	st.failed(call, err)
	ru.stats.fallbacks[modeIndex(st.mode)].Add(1)
	switch st.mode {
	case ruleconfig.StoreErrorFailOpen:
		return limiter.Decision{}, failedOpen, scale
	case ruleconfig.StoreErrorFailClosed:
		return limiter.Decision{}, failedClosed, scale
	}
	local := scale * st.fallbackShare()
	d = ru.lim.AllowScaledAt(key, now, cost, local)
	for i := 0; i < d.Len && scale > 0; i++ {
		d.Quotas[i].Limit = limiter.ScaledCount(ru.Limits[i].Count, scale) // the fleet's limit, as Redis shows it
	}
	return d, fromLocal, local
}

// refundStore gives back what a decision of Redis took (t: at Redis's
// time, at scale), for a request that another rule denied or whose
// response took fewer units than it reserved, within the store's
// timeout: best effort, a failure is counted and logged (rate-limited)
// and the units stay taken. It does not wait for a client that went
// away.
func (ru *rule) refundStore(ctx context.Context, key string, t limiter.Taken) {
	st := ru.store
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.timeout)
	defer cancel()
	if err := st.store.Refund(callCtx, key, t); err != nil {
		st.failed("refund", err)
	} else {
		st.ok()
	}
}

// The reasons of caddy_rate_limit_store_errors_total.
var storeErrorReasons = [...]string{"timeout", "unavailable", "script"}

// storeErrors counts failed Redis calls by reason, process-wide.
var storeErrors [len(storeErrorReasons)]atomic.Uint64

// storeErrorReason sorts a Store error: timeout (the call's deadline
// passed), unavailable (refused, reset, breaker open, Redis loading or
// read-only, credentials refused) or script (Redis answered with an error: a bug, or a key of
// another type under the prefix).
func storeErrorReason(err error) int {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return 0
	case errors.Is(err, redisstore.ErrUnavailable):
		return 1
	}
	return 2
}

// failed counts a failed call and logs it, at most once per probe
// interval while Redis stays down (the line counts those not logged).
// Script errors log at error level: Redis is there but refuses the call.
func (st *ruleStore) failed(call string, err error) {
	reason := storeErrorReason(err)
	storeErrors[reason].Add(1)
	now := time.Now().UnixNano()
	last := st.lastLog.Load()
	wasDown := st.down.Swap(true)
	if (wasDown && now-last < int64(st.probe)) || !st.lastLog.CompareAndSwap(last, now) {
		st.suppressed.Add(1)
		return
	}
	level := zap.WarnLevel
	if reason == 2 {
		level = zap.ErrorLevel
	}
	if ce := st.logger.Check(level, "rate limit store: redis call failed; on_store_error applies"); ce != nil {
		ce.Write(
			zap.String("rule", st.rule),
			zap.String("call", call),
			zap.String("reason", storeErrorReasons[reason]),
			zap.String("on_store_error", st.mode),
			zap.Uint64("failures_not_logged", st.suppressed.Swap(0)),
			zap.Error(err))
	}
}

// ok notes a call that succeeded: after failures, a line says Redis
// decides again.
func (st *ruleStore) ok() {
	if st.down.Load() && st.down.CompareAndSwap(true, false) {
		st.logger.Info("rate limit store: redis answers again; decisions come from it",
			zap.String("rule", st.rule), zap.Uint64("failures_not_logged", st.suppressed.Swap(0)))
	}
}

// storeUp is 1 if every rule's breaker is closed (Redis answered the last
// call), else 0.
func (a *App) storeUp() float64 {
	if a.redis == nil {
		return 1
	}
	for _, st := range a.redis.stores {
		if b := st.store.Breaker(); b != nil && b.State() != redisstore.Closed {
			return 0
		}
	}
	return 1
}
