package caddymodule

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redispool"
	"github.com/edgebyte/edgelimit/limiter"
)

// The metrics: namespace caddy, subsystem rate_limit. Their only labels
// are rule names and fixed words, never anything a client sends.
var (
	descRequests = newDesc("caddy_rate_limit_requests_total",
		"Requests a rule decided, by decision: allowed, denied, shadow_denied (would have been denied; served), exempt.",
		"rule", "decision")
	descKeys = newDesc("caddy_rate_limit_keys",
		"Keys a rule holds state for.",
		"rule")
	descMaxKeys = newDesc("caddy_rate_limit_max_keys",
		"The bound on the keys a rule holds state for (max_keys): past it, keys are evicted.",
		"rule")
	descEvictions = newDesc("caddy_rate_limit_evictions_total",
		"Keys a rule evicted to stay within max_keys, by state: under_limit, or limited (left at one of its limits: evicted only when every key of its shard was, a sign that max_keys is too small).",
		"rule", "state")

	descHeld = newDesc("caddy_rate_limit_held",
		"Requests a leaky_bucket rule holds now, waiting to be served; at max_held, requests that would wait are refused at once.",
		"rule")

	descJWTFailures = newDesc("caddy_rate_limit_jwt_failures_total",
		"Tokens that failed verification for rules keyed by a JWT claim, by reason; such requests get no key from the token.",
		"reason")

	descStoreErrors = newDesc("caddy_rate_limit_store_errors_total",
		"Calls to the Redis store that failed, by reason: timeout, unavailable (refused, reset, breaker open), script (Redis answered with an error). Exported with a store block.",
		"reason")
	descStoreFallbacks = newDesc("caddy_rate_limit_store_fallbacks_total",
		"Requests of a rule with store redis that Redis could not decide, by the on_store_error mode applied: local, fail_open, fail_closed.",
		"rule", "mode")
	descStoreRequests = newDesc("caddy_rate_limit_store_requests_total",
		"Requests of a rule with store redis, by how they were decided: call (the request made a call to Redis, failed ones included), coalesced (decided in a call another request of the same key made), over_limit_cache (denied without a call: Redis had denied the key, and its Retry-After had not passed).",
		"rule", "via")
	descStoreRoundTrips = newDesc("caddy_rate_limit_store_round_trips_total",
		"Round trips to Redis of the rules' scripts (decisions, checks, charges, refunds), process-wide: a script sent alone, or a pipeline of the scripts of concurrent requests. Exported with a store block.")
	descStoreScripts = newDesc("caddy_rate_limit_store_scripts_total",
		"Scripts of the rules sent to Redis in those round trips, process-wide; scripts over round trips is the mean pipeline. Exported with a store block.")
	descStoreUp = newDesc("caddy_rate_limit_store_up",
		"1 if Redis answered the last call of every rule with store redis (their breakers are closed), 0 if a breaker is open. Exported with a store block.")
	descStoreNodes = newDesc("caddy_rate_limit_store_nodes",
		"Nodes sharing the Redis store (processes with the same Redis and key_prefix, this one included), as last seen through Redis; 1 before the first heartbeat. With on_store_error local, each enforces 1/nodes of a rule's limits while Redis is away. Exported with a store block.")

	// decisionSeconds is the time the handler takes over a request
	// (rules matched, keyed, decided, headers set), measured on one
	// request in decisionSample.
	decisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "caddy",
		Subsystem: "rate_limit",
		Name:      "decision_seconds",
		Help:      "Time the rate_limit handler takes to decide a request, sampled on one request in 64.",
		Buckets:   prometheus.ExponentialBuckets(250e-9, 2, 14), // 250ns to 2ms
	})
)

// decisionSample is how many decisions of a rule pass for one that is
// timed.
const decisionSample = 64

// observeDecision records the time since start, for a timed request.
func observeDecision(start time.Time) {
	decisionSeconds.Observe(time.Since(start).Seconds())
}

// collector reads the rules' statistics from the registry when Prometheus
// scrapes: the counts live with the rules' counters, so they survive config
// reloads, while each config has a metrics registry of its own.
type collector struct{}

// Describe sends the metrics' descriptions.
func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRequests
	ch <- descKeys
	ch <- descMaxKeys
	ch <- descEvictions
	ch <- descHeld
	ch <- descJWTFailures
	ch <- descClusterMembers
	ch <- descGossipBytes
	ch <- descGossipDropped
	ch <- descStoreErrors
	ch <- descStoreFallbacks
	ch <- descStoreRequests
	ch <- descStoreRoundTrips
	ch <- descStoreScripts
	ch <- descStoreUp
	ch <- descStoreNodes
	describeAbuse(ch) // metrics_abuse.go
	ch <- descInFlight
	ch <- descConcurrentRefused
	ch <- descUnleased
	describePersist(ch) // metrics_persist.go
	decisionSeconds.Describe(ch)
}

// Collect sends every rule's current counts.
func (collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range registry.list() {
		if r.rule.DisableMetrics {
			continue
		}
		st := r.stats.snapshot()
		for _, v := range []struct {
			decision string
			n        uint64
		}{{"allowed", st.Allowed}, {"denied", st.Denied}, {"shadow_denied", st.ShadowDenied}, {"exempt", st.Exempt}} {
			ch <- counter(descRequests, float64(v.n), r.name, v.decision)
		}
		ch <- gauge(descKeys, float64(r.lim.Len()), r.name)
		ch <- gauge(descMaxKeys, float64(maxKeysOf(r.lim)), r.name)
		collectAbuse(ch, r)
		all, limited := r.lim.EvictionCounts()
		ch <- counter(descEvictions, float64(all-limited), r.name, "under_limit")
		ch <- counter(descEvictions, float64(limited), r.name, "limited")
		collectConcurrency(ch, r)
		if r.rule.Algorithm == string(limiter.LeakyBucket) {
			ch <- gauge(descHeld, float64(r.stats.held.Load()), r.name)
		}
		if r.rule.Store == ruleconfig.StoreRedis {
			for i, mode := range storeModes {
				n := r.stats.fallbacks[i].Load()
				if n > 0 || mode == r.rule.OnStoreError || (i == 0 && r.rule.OnStoreError == "") {
					ch <- counter(descStoreFallbacks, float64(n), r.name, mode)
				}
			}
			sc := &r.stats.store
			for _, v := range []struct {
				via string
				n   uint64
			}{{"call", sc.Calls.Load()}, {"coalesced", sc.Coalesced.Load()}, {"over_limit_cache", sc.OverLimitCached.Load()}} {
				ch <- counter(descStoreRequests, float64(v.n), r.name, v.via)
			}
		}
	}
	app := activeApp.Load()
	if app != nil && app.tokens != nil {
		for i, reason := range jwtReasons {
			ch <- counter(descJWTFailures, float64(jwtFailures[i].Load()), reason)
		}
	}
	if app != nil && app.Store != nil {
		for i, reason := range storeErrorReasons {
			ch <- counter(descStoreErrors, float64(storeErrors[i].Load()), reason)
		}
		ch <- counter(descStoreRoundTrips, float64(redispool.Wire.RoundTrips.Load()))
		ch <- counter(descStoreScripts, float64(redispool.Wire.Scripts.Load()))
		ch <- gauge(descStoreUp, app.storeUp())
		ch <- gauge(descStoreNodes, app.storeNodes())
	}
	collectCluster(ch)
	collectPersist(ch)
	decisionSeconds.Collect(ch)
}

// newDesc describes the metric name, whose series have the labels
// given (none: a single series).
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// counter is a series of the counter d: its value n, its labels' values.
func counter(d *prometheus.Desc, n float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, n, labels...)
}

// gauge is a series of the gauge d: its value v, its labels' values.
func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// registerMetrics adds the collector to a config's metrics registry.
func registerMetrics(reg prometheus.Registerer) error {
	err := reg.Register(collector{})
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil
	}
	return err
}

// maxKeysOf is the bound on lim's keys.
func maxKeysOf(lim *limiter.Limiter) int {
	if n := lim.Config().MaxKeys; n > 0 {
		return n
	}
	return limiter.DefaultMaxKeys
}
