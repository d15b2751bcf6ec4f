package caddymodule

// The Redis store: rules with `store redis` keep their state in one Redis
// shared by every node, through package redisstore, and fall back on
// their in-process limiter (or fail open, or closed) when it is away.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/edgebyte/edgelimit/redisstore"
)

// StoreConfig says where the rules with `store redis` keep their state.
// Rules keep it in process (store local) unless they say otherwise.
type StoreConfig struct {
	// Redis is the Redis that rules with store redis share. Required.
	Redis *RedisConfig `json:"redis,omitempty"`
}

// RedisConfig is the Redis (a server, a Redis Cluster, or a master found
// through Sentinels) that rules with `store redis` decide on: every node
// configured with it enforces one exact limit per key. One client per
// process serves every such rule, kept across reloads while this block is
// unchanged.
type RedisConfig struct {
	// Addresses are host:port: the server; with Cluster, seeds of the
	// Redis Cluster; with SentinelMaster, the Sentinels. Placeholders such
	// as {env.REDIS_ADDR} are replaced. Required: one, unless Cluster or
	// SentinelMaster.
	Addresses []string `json:"addresses,omitempty"`

	// Username is the ACL user (Redis 6+). Placeholders are replaced.
	// Default: none (the default user).
	Username string `json:"username,omitempty"`

	// Password authenticates to Redis: the server, every node of the
	// Redis Cluster, or the master found through Sentinels, not the
	// Sentinels themselves (see SentinelPassword). Placeholders such as
	// {env.REDIS_PASSWORD} are replaced. Default: none.
	Password string `json:"password,omitempty"`

	// DB is the logical database; a Redis Cluster has only 0. Default: 0.
	DB int `json:"db,omitempty"`

	// TLS connects with TLS (the system's roots verify the server).
	// Default: off.
	TLS bool `json:"tls,omitempty"`

	// Timeout bounds each call to Redis on the request path, from taking
	// a connection (or dialing one) to reading the reply; past it the
	// rule's on_store_error applies. Default: 50ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// KeyPrefix starts every Redis key; each rule adds its name and ':'.
	// It must not hold '{' or '}'. Default: "edgelimit:".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Cluster makes Addresses the seeds of a Redis Cluster. Default: off.
	Cluster bool `json:"cluster,omitempty"`

	// SentinelMaster is the master's name when Addresses are Sentinels.
	// Placeholders are replaced. Default: none.
	SentinelMaster string `json:"sentinel_master,omitempty"`

	// SentinelUsername is the ACL user on the Sentinels (Redis 6.2+),
	// with SentinelMaster. Placeholders are replaced. Default: none (the
	// default user).
	SentinelUsername string `json:"sentinel_username,omitempty"`

	// SentinelPassword authenticates to the Sentinels (their requirepass,
	// or SentinelUsername's password), with SentinelMaster; Password is
	// the master's. Placeholders such as {env.SENTINEL_PASSWORD} are
	// replaced. Default: none.
	SentinelPassword string `json:"sentinel_password,omitempty"`

	// ProbeInterval is how long a rule fails fast after Redis failed
	// (applying on_store_error without trying it) before one request
	// probes it again; also the most often a rule logs that Redis fails.
	// Default: 1s.
	ProbeInterval caddy.Duration `json:"probe_interval,omitempty"`

	// Coalesce turns coalescing on: the requests of one key (same cost and
	// scale) that arrive while a call for that key is in flight are
	// decided together in the next call, one after the other in one script
	// run, as exactly as separate calls. It saves Redis (and this node)
	// the work of a call per request of a hot key, at the price of up to
	// one call's wait for those requests; a request whose deadline leaves
	// less than the call in flight and two more calls (by the recent
	// calls' duration) calls on its own instead. A key with one request at
	// a time never waits. Default: false (off).
	Coalesce bool `json:"coalesce,omitempty"`

	// NoOverLimitCache turns the over-limit cache off: by default, a key
	// Redis denied is denied by this node without a call until the
	// denial's Retry-After has passed, for a second at most (for requests
	// of at least the cost denied, at the same scale), in a cache of up to
	// 65,536 keys per rule. Units given back meanwhile by another node (a
	// refund, an admin reset) are seen only after that. Default: false
	// (cache on).
	NoOverLimitCache bool `json:"no_over_limit_cache,omitempty"`
}

// overLimitCacheKeys is the size of each rule's over-limit cache.
const overLimitCacheKeys = 65536

// Defaults of the redis block.
const (
	defaultStoreTimeout = 50 * time.Millisecond
	minDialTimeout      = time.Second
)

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

// settings checks the configuration and fills in its defaults.
func (c *RedisConfig) settings() (redispool.Settings, error) {
	repl := caddy.NewReplacer()
	s := redispool.Settings{
		Coalesce: c.Coalesce, OverLimit: !c.NoOverLimitCache,
		Username: repl.ReplaceKnown(c.Username, ""), Password: repl.ReplaceKnown(c.Password, ""),
		DB: c.DB, TLS: c.TLS, Cluster: c.Cluster, Master: repl.ReplaceKnown(c.SentinelMaster, ""),
		SentinelUsername: repl.ReplaceKnown(c.SentinelUsername, ""), SentinelPassword: repl.ReplaceKnown(c.SentinelPassword, ""),
		Timeout: time.Duration(c.Timeout), Probe: time.Duration(c.ProbeInterval), Prefix: c.KeyPrefix,
	}
	for _, a := range c.Addresses {
		a = repl.ReplaceKnown(a, "")
		if err := CheckRedisAddress(a); err != nil {
			return s, err
		}
		s.Addrs = append(s.Addrs, a)
	}
	switch {
	case len(s.Addrs) == 0:
		return s, fmt.Errorf("store redis: no address")
	case s.Master == "" && (c.SentinelUsername != "" || c.SentinelPassword != ""):
		return s, fmt.Errorf("store redis: sentinel_username and sentinel_password need sentinel_master (they authenticate to Sentinels; password is the server's)")
	case s.Cluster && s.Master != "":
		return s, fmt.Errorf("store redis: cluster on and sentinel_master %q: choose one (a Redis Cluster, or a master found through Sentinels)", s.Master)
	case len(s.Addrs) > 1 && !s.Cluster && s.Master == "":
		return s, fmt.Errorf("store redis: %d addresses: one server has one address (several are the seeds of a Redis Cluster with cluster on, or Sentinels with sentinel_master)", len(s.Addrs))
	case s.DB < 0:
		return s, fmt.Errorf("store redis: db %d: must not be negative", s.DB)
	case s.Cluster && s.DB != 0:
		return s, fmt.Errorf("store redis: db %d: a Redis Cluster has only db 0", s.DB)
	case s.Timeout < 0:
		return s, fmt.Errorf("store redis: timeout %s: must be positive", s.Timeout)
	case s.Probe < 0:
		return s, fmt.Errorf("store redis: probe_interval %s: must be positive", s.Probe)
	case strings.ContainsAny(s.Prefix, "{}"):
		return s, fmt.Errorf("store redis: key_prefix %q: must not contain '{' or '}' (they would move the Redis Cluster hash tag)", s.Prefix)
	}
	if s.Timeout == 0 {
		s.Timeout = defaultStoreTimeout
	}
	if s.Probe == 0 {
		s.Probe = redisstore.DefaultProbeInterval
	}
	if s.Prefix == "" {
		s.Prefix = redisstore.DefaultKeyPrefix
	}
	print, _ := json.Marshal(struct {
		Addrs              []string
		Username, Password string
		DB                 int
		TLS, Cluster       bool
		Master             string
		SentinelUsername   string
		SentinelPassword   string
		Timeout            time.Duration
	}{s.Addrs, s.Username, s.Password, s.DB, s.TLS, s.Cluster, s.Master, s.SentinelUsername, s.SentinelPassword, s.Timeout})
	sum := sha256.Sum256(print)
	s.Print = hex.EncodeToString(sum[:])
	return s, nil
}

// checkRedisAddress checks one address of the redis block.
func CheckRedisAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Errorf("store redis: address %q: want host:port, such as 10.0.0.9:6379", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("store redis: address %q: the port must be a number from 1 to 65535", a)
	}
	return nil
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
func provisionRedis(cfg *StoreConfig) (*redisUse, error) {
	if cfg.Redis == nil {
		return nil, fmt.Errorf("store: no redis block (the one store there is)")
	}
	settings, err := cfg.Redis.settings()
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
		KeyPrefix:     u.settings.Prefix + redisstore.Escape(r.Name) + ":",
		ProbeInterval: u.settings.Probe,
		Coalesce:      u.settings.Coalesce,
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
// rule's on_store_error. It returns the scale of the decision: with the
// in-process fallback, scale times this node's share of the fleet, for a
// refund.
func (ru *rule) decideStore(ctx context.Context, key string, now time.Time, cost int64, scale float64) (limiter.Decision, storeOutcome, float64, redisstore.Block) {
	st := ru.store
	callCtx, cancel := context.WithTimeout(ctx, st.timeout)
	sd, err := st.store.Decide(callCtx, key, cost, scale)
	cancel()
	d := sd.Decision
	if err == nil {
		st.ok()
		return d, fromStore, scale, sd.Block
	}
	d, from, local := ru.storeFailed(ctx, err, "allow", key, now, cost, scale)
	return d, from, local, redisstore.Block{}
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

// refundStore gives back units Redis took at scale for a request that
// another rule denied, within the store's timeout: best effort, a failure
// is counted and logged (rate-limited) and the units stay taken. It does
// not wait for a client that went away.
func (ru *rule) refundStore(ctx context.Context, key string, cost int64, scale float64) {
	st := ru.store
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), st.timeout)
	defer cancel()
	if err := st.store.RefundScaled(callCtx, key, cost, scale); err != nil {
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
