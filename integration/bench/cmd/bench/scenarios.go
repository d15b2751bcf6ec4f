package main

import "time"

// A scenario is one row of the end-to-end table: a traffic shape, a limit,
// and the config each limiter gets for it.
type scenario struct {
	Name   string // the row's label
	Script string // wrk script, "" for plain GETs from one client
	// TouchAll sends each of the 200,000 keys once before the run, so
	// that they are over their limit when it starts.
	TouchAll bool
	// Limit and Window are the limit of every key (caddy-ratelimit's
	// max_events and window); Key is "ip" (the client: one key here) or
	// "header" (X-Client).
	Limit  int64
	Window time.Duration
	Key    string
	// Upstream puts a reverse proxy to a plain Caddy (on the same core) in
	// place of the response: a request denied is one the upstream never
	// sees.
	Upstream bool
	// Conns is wrk's connections; 0: loadConns. One connection measures a
	// request's latency without queueing.
	Conns int
	// HeadersOff gives edgelimit's rule `headers off` (the cpu stage's
	// control): no rate-limit headers on an allowed request.
	HeadersOff bool
}

// scenarios are the end-to-end rows. denyLimit is the one-key limit that
// denies about 90% of requests: a tenth of plain Caddy's throughput.
func scenarios(denyLimit int64) []scenario {
	return []scenario{
		{Name: "one key, allowing", Limit: 100_000, Window: time.Second, Key: "ip"},
		{Name: "one key, ~90% denied", Limit: denyLimit, Window: time.Second, Key: "ip"},
		{Name: "200,000 keys, allowing (events 100)", Script: "keys.lua", Limit: 100, Window: time.Minute, Key: "header"},
		{Name: "200,000 keys, allowing (events 1000)", Script: "keys.lua", Limit: 1000, Window: time.Minute, Key: "header"},
		{Name: "200,000 keys, 90% denied", Script: "mostly-known.lua", TouchAll: true, Limit: 1, Window: time.Hour, Key: "header"},
		{Name: "large limit (100,000,000/min), allowing", Limit: 100_000_000, Window: time.Minute, Key: "ip"},
		{Name: "one key, denying most, `reverse_proxy` to an upstream", Limit: denyLimit, Window: time.Second, Key: "ip", Upstream: true},
	}
}

// respond is the route's last handler: what plain Caddy serves.
var respond = map[string]any{"handler": "static_response", "body": "ok"}

// proxy is the last handler of the rows with an upstream.
var proxy = map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": upstreamAddr}}}

// handlers is the route for bin under sc.
func handlers(bin binary, sc scenario) []map[string]any {
	respond := respond
	if sc.Upstream {
		respond = proxy
	}
	switch bin {
	case edgelimit:
		by := "ip"
		if sc.Key == "header" {
			by = "header X-Client"
		}
		rule := map[string]any{
			"name":   "bench",
			"limits": []any{map[string]any{"count": sc.Limit, "window": sc.Window}},
			"by":     []string{by},
		}
		if sc.HeadersOff {
			rule["headers"] = "off"
		}
		return []map[string]any{{"handler": "rate_limit", "rules": []any{rule}}, respond}
	case ratelimit:
		key := "{http.request.remote.host}"
		if sc.Key == "header" {
			key = "{http.request.header.X-Client}"
		}
		return []map[string]any{{
			"handler": "rate_limit",
			"rate_limits": map[string]any{"bench": map[string]any{
				"key":        key,
				"window":     sc.Window,
				"max_events": sc.Limit,
			}},
		}, respond}
	}
	return []map[string]any{respond}
}
