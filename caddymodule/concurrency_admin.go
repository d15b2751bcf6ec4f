package caddymodule

// max_concurrent in the admin API and the metrics: a key's requests in
// flight, a rule's total, and the gauge caddy_rate_limit_in_flight{rule}.

import (
	"github.com/prometheus/client_golang/prometheus"
)

// descInFlight is the gauge of a max_concurrent rule's requests in flight.
var descInFlight = prometheus.NewDesc("caddy_rate_limit_in_flight",
	"Requests in flight under a rule's max_concurrent, all keys, on this node.", []string{"rule"}, nil)

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

// inFlightOf is key's requests in flight under e's max_concurrent, and
// whether e has one.
func inFlightOf(e ruleEntry, key string) (int64, bool) {
	c := concurrencyIn(e)
	if c == nil {
		return 0, false
	}
	return c.inFlight.InFlightOf(key), true
}

// ruleInFlight sets a rule view's requests in flight.
func ruleInFlight(v *ruleView, e ruleEntry) {
	if c := concurrencyIn(e); c != nil {
		n, busiest := c.inFlight.Total(), c.inFlight.Busiest(10)
		v.InFlight, v.BusiestInFlight = &n, make([]keyInFlightView, 0, len(busiest))
		for _, k := range busiest {
			key, escaped := jsonKey(k.Key)
			v.BusiestInFlight = append(v.BusiestInFlight, keyInFlightView{key, escaped, k.InFlight})
		}
		if e.rule.ConcurrentOnly() {
			v.Limits = []limitView{} // its limiter decides nothing
		}
	}
}

// keyInFlightView is a key and its requests in flight.
type keyInFlightView struct {
	Key      string `json:"key"`
	Escaped  bool   `json:"escaped,omitempty"`
	InFlight int64  `json:"in_flight"`
}

// keyInFlight sets a key view's requests in flight; a rule with
// max_concurrent alone shows no limits, and a request is allowed while
// the key has fewer than N (this node's part of it in a cluster is not
// shown: the admin answers for the rule as configured).
func keyInFlight(v *keyView, e ruleEntry, key string) {
	n, ok := inFlightOf(e, key)
	if ok {
		setInFlight(v, e, n)
	}
}

// setInFlight sets a key view's n requests in flight, of e's
// max_concurrent.
func setInFlight(v *keyView, e ruleEntry, n int64) {
	v.InFlight, v.MaxConcurrent = &n, e.rule.MaxConcurrent
	if e.rule.ConcurrentOnly() {
		v.Limits = []keyLimitView{}
		v.Allowed, v.RetryAfterSeconds = n < int64(e.rule.MaxConcurrent), 0
	} else if n >= int64(e.rule.MaxConcurrent) {
		v.Allowed = false
	}
}

// forgetInFlight forgets key's requests in flight under e's
// max_concurrent (an admin reset), and reports whether it had any.
func forgetInFlight(e ruleEntry, key string) bool {
	if c := concurrencyIn(e); c != nil {
		return c.inFlight.Forget(key)
	}
	return false
}
