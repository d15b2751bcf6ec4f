package caddymodule

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"golang.org/x/net/http/httpguts"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("rate_limit", parseGlobalOption)
}

// parseGlobalOption sets up the rate_limit app from the global option:
//
//	{
//	    rate_limit {
//	        sweep_interval <duration>
//	        geoip <path to a .mmdb file>
//	        geo_header <header name>
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

		case "geoip", "geo_header":
			name := d.Val()
			if !d.NextArg() {
				return nil, d.Errf("%s: expected one argument", name)
			}
			if name == "geoip" {
				app.GeoIP = d.Val()
			} else if app.GeoHeader = d.Val(); !httpguts.ValidHeaderFieldName(app.GeoHeader) {
				return nil, d.Errf("geo_header %q: not a valid header name", app.GeoHeader)
			}
			if d.NextArg() {
				return nil, d.Errf("%s: expected one argument, got also %q", name, d.Val())
			}

		// cluster { … } goes here.

		default:
			return nil, d.Errf("unrecognized subdirective %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "rate_limit", Value: caddyconfig.JSON(app, nil)}, nil
}
