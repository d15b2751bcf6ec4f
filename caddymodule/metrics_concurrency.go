package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// descInFlight is the gauge of a max_concurrent rule's requests in flight.
var descInFlight = prometheus.NewDesc("caddy_rate_limit_in_flight",
	"Requests in flight under a rule's max_concurrent, all keys, on this node.", []string{"rule"}, nil)

// descUnleased is the gauge of a max_concurrent rule's requests in
// flight that its store redis fallback admitted.
var descUnleased = prometheus.NewDesc("caddy_rate_limit_store_unleased_in_flight",
	"Requests in flight under a rule's max_concurrent with store redis that the on_store_error local fallback admitted while Redis was away, on this node: they hold no lease, and count against N (Redis's leases of their key are taken against N less them) until they end.", []string{"rule"}, nil)

// descConcurrentRefused counts a max_concurrent rule's refusals.
var descConcurrentRefused = prometheus.NewDesc("caddy_rate_limit_concurrent_refused_total",
	"Requests refused by a rule's max_concurrent: at N (429), or with the table of keys in flight full (503).", []string{"rule", "reason"}, nil)

// collectConcurrency sends a max_concurrent rule's series.
func collectConcurrency(ch chan<- prometheus.Metric, e ruleEntry) {
	c := concurrencyIn(e)
	if c == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.inFlight.Total()), e.name)
	if e.rule.Store == ruleconfig.StoreRedis {
		ch <- prometheus.MustNewConstMetric(descUnleased, prometheus.GaugeValue, float64(c.unleased.Total()), e.name)
	}
	ch <- prometheus.MustNewConstMetric(descConcurrentRefused, prometheus.CounterValue, float64(c.refused.Load()), e.name, "at_limit")
	ch <- prometheus.MustNewConstMetric(descConcurrentRefused, prometheus.CounterValue, float64(c.full.Load()), e.name, "table_full")
}

// concurrencyIn is the max_concurrent state of a rule in force, nil if it
// has no max_concurrent.
func concurrencyIn(e ruleEntry) *concurrency {
	if e.rule.MaxConcurrent == 0 {
		return nil
	}
	return registry.concurrencyOf(e.name)
}
