package caddymodule

import (
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
)

// Virtual is what `caddy rate-limit replay` (package replay) puts a
// provisioned config in: its handlers decide requests served before, read
// from an access log, on the log's clock. Nothing in the request path
// changes for a live config but one check of App.virtual where the
// clock is read (App.now), where a leaky bucket would wait, and where an
// allowed request's RateLimit headers are written.
//
// Under Virtual, a handler:
//   - decides each request at Now, not the wall clock (a count_status
//     charge is taken at Now too);
//   - does not hold a request for a leaky bucket's delay (the delay is
//     decided, and counted, as live);
//   - does not write the RateLimit headers of a request it lets on: the
//     response is not sent, and no decision reads them (a refusal's
//     are written, as live);
//   - decides a rule with store redis in process, as one node holding
//     the whole limit: Redis is not called (a rule with scope cluster
//     does so already, as the cluster node is not started);
//   - tells Observer of every decision.
//
// Requests are replayed one at a time: max_concurrent and max_held, which
// count requests in flight together, never refuse.
type Virtual struct {
	// Now is the time the next request is decided at; the replay sets
	// it before each request.
	Now time.Time

	// Observer is told of each rule's decisions. Required.
	Observer Observer
}

// Observer is told, under Virtual, of what each rule decides. Calls come
// from the goroutine serving the request.
type Observer interface {
	// Decided: rule decided a request of key asking cost units; allowed
	// is false when it refused it, or would have (a shadow rule).
	Decided(rule, key string, cost int64, allowed bool)

	// Keyless: rule applied to a request that had none of its keys (its
	// on_missing_key then decides what becomes of the request).
	Keyless(rule string)
}

// observed is a rule's Observer and name.
type observed struct {
	o    Observer
	rule string
}

// Replay puts h's config under v and returns h's rules as provisioned
// (names derived, rules_file and zones included). Call it after the config
// is provisioned and before its first request; a config under Virtual is
// never started (no port bound, no cluster node, no Redis heartbeat).
func (h *Handler) Replay(v *Virtual) []ruleconfig.Rule {
	h.app.virtual = v
	out := make([]ruleconfig.Rule, len(h.rules))
	for i, ru := range h.rules {
		ru.store = nil // in process: the limiter that on_store_error local falls back to
		ru.stats.observe = &observed{o: v.Observer, rule: ru.Name}
		out[i] = ru.Rule
	}
	return out
}

// now is the time a request is decided at: the wall clock, or the virtual
// clock of a replay.
func (a *App) now() time.Time {
	if v := a.virtual; v != nil {
		return v.Now
	}
	return time.Now()
}
