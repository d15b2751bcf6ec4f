package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/limiter"
)

// This file reads the Caddyfile syntax of mholt/caddy-ratelimit, which this
// plugin replaces, so that its configs work unchanged:
//
//	rate_limit {
//	    zone <name> {
//	        key         <text with placeholders>
//	        events      <count>
//	        window      <duration>
//	        match       { <request matchers> }   # repeatable
//	        ipv4_prefix <bits>                   # with a client IP key
//	        ipv6_prefix <bits>
//	    }
//	    jitter         <fraction>                # retry_jitter of every rule
//	    log_key                                  # log_key of every rule
//	    sweep_interval <duration>
//	    distributed { … }                        # ignored, with a warning
//	    storage <module…>                        # ignored, with a warning
//	}
//
// A zone is a rule named after it, with algorithm sliding_log (the exact
// window caddy-ratelimit has), limit <events> <window> and by <key>.
// Zones inherit the defaults at the top of the block like rule blocks do,
// and may be mixed with them.

// parseCompat reads one of caddy-ratelimit's handler-level subdirectives,
// d being at its name; for a zone it returns the zone's rule.
func parseCompat(d *caddyfile.Dispenser, handler *Handler, top *ruleSpec) (*ruleSpec, error) {
	switch d.Val() {
	case "zone":
		return parseZone(d)

	case "jitter":
		return nil, top.parseAs(d, "retry_jitter")

	case "sweep_interval":
		if handler.SweepInterval != 0 {
			return nil, d.Errf("sweep_interval already given")
		}
		every, err := intervalArg(d, "sweep_interval")
		if err != nil {
			return nil, err
		}
		handler.SweepInterval = caddy.Duration(every)
		caddy.Log().Warn("rate_limit: sweep_interval in a rate_limit block is accepted for caddy-ratelimit configs and has no effect; idle keys are swept by the rate_limit global option's sweep_interval",
			zap.String("file", d.File()), zap.Int("line", d.Line()))

	case "distributed", "storage":
		tok := d.Token()
		d.RemainingArgs()
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			// skip the block's contents
		}
		// A warning in the adapter's list would be better, but the
		// Helper's warnings slice is unexported: log it.
		caddy.Log().Warn("rate_limit: caddy-ratelimit's distributed rate limiting is not supported, and this subdirective is ignored; "+
			"share limits between instances with the cluster block of the rate_limit global option",
			zap.String("subdirective", tok.Text),
			zap.String("file", tok.File),
			zap.Int("line", tok.Line))
	}
	return nil, nil
}

// clientIPKeys are the zone keys that ipv4_prefix and ipv6_prefix may
// shorten; they become `by ip/V4/V6`. Both the shorthands and what the
// Caddyfile adapter expands them to are listed.
var clientIPKeys = map[string]bool{
	"{remote_host}":              true,
	"{http.request.remote.host}": true,
	"{client_ip}":                true,
	"{http.vars.client_ip}":      true,
}

// parseZone reads `zone NAME { … }`.
func parseZone(d *caddyfile.Dispenser) (*ruleSpec, error) {
	spec := newRuleSpec(d.Token())
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	name := d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	var (
		key       string
		events    int64
		window    caddy.Duration
		v4, v6    = 32, 128
		prefixTok *caddyfile.Token
		matchers  caddyhttp.RawMatcherSets
		seen      = make(map[string]caddyfile.Token)
	)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if tok, dup := seen[sub]; dup && sub != "match" {
			return nil, d.Errf("zone %s: %s already given on line %d", name, sub, tok.Line)
		}
		seen[sub] = d.Token()
		switch sub {
		case "key":
			if err := oneArg(d, &key); err != nil {
				return nil, err
			}
		case "events":
			var arg string
			if err := oneArg(d, &arg); err != nil {
				return nil, err
			}
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n < 1 || n > limiter.MaxCount {
				return nil, d.Errf("zone %s: events %s: must be a whole number from 1 to %d", name, arg, int64(limiter.MaxCount))
			}
			events = n
		case "window":
			var arg string
			if err := oneArg(d, &arg); err != nil {
				return nil, err
			}
			w, err := durationArg(d, "window", arg)
			if err != nil {
				return nil, err
			}
			if w < limiter.MinWindow || w > limiter.MaxWindow {
				return nil, d.Errf("zone %s: window %s: must be between %s and %s", name, arg, limiter.MinWindow, limiter.MaxWindow)
			}
			window = caddy.Duration(w)
		case "match":
			set, err := caddyhttp.ParseCaddyfileNestedMatcherSet(d)
			if err != nil {
				return nil, err
			}
			matchers = append(matchers, set)
		case "ipv4_prefix", "ipv6_prefix":
			bits, most := &v4, 32
			if sub == "ipv6_prefix" {
				bits, most = &v6, 128
			}
			var arg string
			if err := oneArg(d, &arg); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > most {
				return nil, d.Errf("zone %s: %s %s: must be a whole number from 0 to %d", name, sub, arg, most)
			}
			*bits = n
			tok := d.Token()
			prefixTok = &tok
		default:
			return nil, d.Errf("unrecognized subdirective %q", sub)
		}
	}
	if events == 0 || window == 0 {
		return nil, errAtToken(spec.start, "zone %s: a zone needs both events and window", name)
	}

	var by string
	switch {
	case prefixTok != nil:
		if !clientIPKeys[key] {
			return nil, errAtToken(*prefixTok, "zone %s: ipv4_prefix and ipv6_prefix need a client IP key ({remote_host} or {client_ip}), not %q", name, key)
		}
		by = fmt.Sprintf("ip/%d/%d", v4, v6)
	case key == "":
		// caddy-ratelimit: one counter for the whole zone
		by = "static global"
	case !strings.Contains(key, "{"):
		// a key without placeholders is the same for every request
		by = "static " + strings.Join(strings.Fields(key), "_")
	default:
		by = key
	}
	if _, err := parseKeySource(by); err != nil {
		return nil, errAtToken(seen["key"], "zone %s: key %q: %v", name, key, err)
	}

	spec.rule = Rule{
		Name:           name,
		MatcherSetsRaw: matchers,
		Algorithm:      string(limiter.SlidingLog),
		Limits:         []Limit{{Count: events, Window: window}},
		By:             []string{by},
	}
	if strings.Contains(by, "{") {
		// caddy-ratelimit counts requests whose key is empty together;
		// skipping them would let a client escape the zone by omitting
		// the key, so they are keyed by client IP unless the block says
		// otherwise (not marked as set: a top-level on_missing_key wins).
		spec.rule.OnMissingKey = missingIP
	}
	for _, sub := range []string{"algorithm", "limit", "by"} {
		spec.set[sub] = spec.start
	}
	if len(matchers) > 0 {
		spec.set["match"] = seen["match"]
	}
	return spec, nil
}
