package admin

import "github.com/edgebyte/edgelimit/caddymodule"

// max_concurrent in the admin API: a key's requests in flight and a
// rule's total.

// inFlightOf is key's requests in flight under e's max_concurrent, and
// whether e has one.
func inFlightOf(e caddymodule.RuleState, key string) (int64, bool) {
	c := e.InFlight()
	if c == nil {
		return 0, false
	}
	return c.InFlightOf(key), true
}

// ruleInFlight sets a rule view's requests in flight.
func ruleInFlight(v *ruleView, e caddymodule.RuleState) {
	if c := e.InFlight(); c != nil {
		n, busiest := c.Total(), c.Busiest(10)
		v.InFlight, v.BusiestInFlight = &n, make([]keyInFlightView, 0, len(busiest))
		for _, k := range busiest {
			key, escaped := jsonKey(k.Key)
			v.BusiestInFlight = append(v.BusiestInFlight, keyInFlightView{key, escaped, k.InFlight})
		}
		if cfg := e.Config(); cfg.ConcurrentOnly() {
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
func keyInFlight(v *keyView, e caddymodule.RuleState, key string) {
	n, ok := inFlightOf(e, key)
	if ok {
		setInFlight(v, e, n)
	}
}

// setInFlight sets a key view's n requests in flight, of e's
// max_concurrent.
func setInFlight(v *keyView, e caddymodule.RuleState, n int64) {
	cfg := e.Config()
	v.InFlight, v.MaxConcurrent = &n, cfg.MaxConcurrent
	if cfg.ConcurrentOnly() {
		v.Limits = []keyLimitView{}
		v.Allowed, v.RetryAfterSeconds = n < int64(cfg.MaxConcurrent), 0
	} else if n >= int64(cfg.MaxConcurrent) {
		v.Allowed = false
	}
}
