package adapt

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
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
//	        ipv4_prefix <bits>                   # a key that is an IP address
//	        ipv6_prefix <bits>                   # is shortened to its network
//	    }
//	    jitter         <fraction>                # retry_jitter of every rule
//	    log_key                                  # log_key of every rule
//	    disable_metrics                          # disable_metrics of every rule
//	    sweep_interval <duration>
//	    distributed { … }                        # ignored, with a warning
//	    storage <module…>                        # ignored, with a warning
//	}
//
// A zone is a rule named after it, with algorithm sliding_log (the exact
// window caddy-ratelimit has), limit <events> <window> and by <key>
// (Zone.rule, shared with the JSON form).
// Zones inherit the defaults at the top of the block like rule blocks do,
// and may be mixed with them.

// parseCompat reads one of caddy-ratelimit's handler-level subdirectives,
// d being at its name; for a zone it returns the zone's rule.
func parseCompat(d *caddyfile.Dispenser, handler *caddymodule.Handler, top *rulesyntax.Spec) (*rulesyntax.Spec, error) {
	switch d.Val() {
	case "zone":
		return parseZone(d)

	case "jitter":
		return nil, top.ParseAs(d, "retry_jitter")

	case "sweep_interval":
		every, err := rulesyntax.IntervalArg(d, "sweep_interval")
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

// parseZone reads `zone NAME { … }`.
func parseZone(d *caddyfile.Dispenser) (*rulesyntax.Spec, error) {
	spec := rulesyntax.NewSpec(d.Token(), caddymodule.RuleChecks())
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	name := d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	var z caddymodule.Zone
	zone := rulesyntax.NewBlock("zone "+name, rulesyntax.Repeatable("match"))
	err := zone.Read(d, func(sub string) error {
		switch sub {
		case "key":
			return rulesyntax.OneArg(d, &z.Key)
		case "events":
			var arg string
			if err := rulesyntax.OneArg(d, &arg); err != nil {
				return err
			}
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil || n < 1 || n > limiter.MaxCount {
				return d.Errf("zone %s: events %s: must be a whole number from 1 to %d", name, arg, int64(limiter.MaxCount))
			}
			z.MaxEvents = n
		case "window":
			var arg string
			if err := rulesyntax.OneArg(d, &arg); err != nil {
				return err
			}
			w, err := rulesyntax.DurationArg(d, "window", arg)
			if err != nil {
				return err
			}
			if w < limiter.MinWindow || w > limiter.MaxWindow {
				return d.Errf("zone %s: window %s: must be between %s and %s", name, arg, limiter.MinWindow, limiter.MaxWindow)
			}
			z.Window = caddy.Duration(w)
		case "match":
			set, err := caddyhttp.ParseCaddyfileNestedMatcherSet(d)
			if err != nil {
				return err
			}
			z.MatcherSetsRaw = append(z.MatcherSetsRaw, set)
		case "ipv4_prefix", "ipv6_prefix":
			dst, most := &z.IPv4Prefix, 32
			if sub == "ipv6_prefix" {
				dst, most = &z.IPv6Prefix, 128
			}
			bits, err := rulesyntax.PrefixArg(d, "zone "+name+": "+sub, most)
			if err != nil {
				return err
			}
			*dst = bits
		default:
			return d.Errf("unrecognized subdirective %q", sub)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if z.MaxEvents == 0 || z.Window == 0 {
		return nil, rulesyntax.ErrAt(spec.Start, "zone %s: a zone needs both events and window", name)
	}
	r, err := z.Rule(name)
	if err != nil {
		return nil, rulesyntax.ErrAt(zone.Set["key"], "%v", err)
	}
	spec.Rule = r
	// a zone's rule is whole: the block's defaults do not change its
	// algorithm, limit, key or prefixes (on_missing_key is not marked,
	// so a top-level on_missing_key wins)
	for _, sub := range []string{"algorithm", "limit", "by"} {
		spec.Set[sub] = spec.Start
	}
	for _, sub := range []string{"ipv4_prefix", "ipv6_prefix"} {
		if tok, ok := zone.Set[sub]; ok {
			spec.Set[sub] = tok
		}
	}
	if len(z.MatcherSetsRaw) > 0 {
		spec.Set["match"] = zone.Set["match"]
	}
	return spec, nil
}
