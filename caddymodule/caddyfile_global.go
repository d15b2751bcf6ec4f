package caddymodule

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("rate_limit", parseGlobalOption)
}

// parseGlobalOption sets up the rate_limit app from the global option:
//
//	{
//	    rate_limit {
//	        sweep_interval <duration>
//	    }
//	}
//
// The block may be empty. Given twice, the second adds to the first.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if prev, ok := existing.(httpcaddyfile.App); ok && len(prev.Value) > 0 {
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("reading the earlier rate_limit option: %v", err)
		}
	}
	d.Next() // the option's name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "sweep_interval":
			every, err := intervalArg(d, "sweep_interval")
			if err != nil {
				return nil, err
			}
			app.SweepInterval = caddy.Duration(every)

		// geoip, geo_header and cluster { … } go here.

		default:
			return nil, d.Errf("unrecognized subdirective %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "rate_limit", Value: caddyconfig.JSON(app, nil)}, nil
}
