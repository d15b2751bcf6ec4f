package caddymodule

import (
	"encoding/json"
	"time"

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
//	        geoip_check_interval <duration>   # read a changed file without a reload
//	        geo_header <header name>
//	        jwt {
//	            hmac_secret     <secret>        # {env.JWT_SECRET}
//	            public_key_file <pem file>      # repeatable
//	            jwks_file       <jwks file>
//	            algorithms      <alg...>        # required: RS256 ES256 HS256 EdDSA …
//	            issuer          <iss>
//	            audience        <aud>
//	            leeway          <duration>
//	            from_header     <name>          # default: Authorization: Bearer
//	            from_cookie     <name>
//	            unverified                      # the jwt_unverified opt-in
//	        }
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

		case "geoip_check_interval":
			every, err := intervalArg(d, "geoip_check_interval")
			if err != nil {
				return nil, err
			}
			app.GeoIPCheckInterval = caddy.Duration(every)

		case "jwt":
			if app.JWT != nil {
				return nil, d.Errf("jwt already given")
			}
			cfg, err := parseJWTBlock(d)
			if err != nil {
				return nil, err
			}
			app.JWT = cfg

		// cluster { … } goes here.

		default:
			return nil, d.Errf("unrecognized subdirective %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "rate_limit", Value: caddyconfig.JSON(app, nil)}, nil
}

// parseJWTBlock reads the jwt { … } block of the global option.
func parseJWTBlock(d *caddyfile.Dispenser) (*JWTConfig, error) {
	cfg := new(JWTConfig)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] && sub != "public_key_file" {
			return nil, d.Errf("jwt: %s already given", sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "hmac_secret":
			err = oneArg(d, &cfg.HMACSecret)
		case "public_key_file":
			var f string
			err = oneArg(d, &f)
			cfg.PublicKeyFiles = append(cfg.PublicKeyFiles, f)
		case "jwks_file":
			err = oneArg(d, &cfg.JWKSFile)
		case "algorithms":
			cfg.Algorithms = d.RemainingArgs()
			if len(cfg.Algorithms) == 0 {
				return nil, d.Errf("jwt: algorithms: list the accepted algorithms, such as RS256 ES256")
			}
		case "issuer":
			err = oneArg(d, &cfg.Issuer)
		case "audience":
			err = oneArg(d, &cfg.Audience)
		case "leeway":
			var arg string
			if err = oneArg(d, &arg); err == nil {
				var dur time.Duration
				if dur, err = durationArg(d, "jwt leeway", arg); err == nil {
					cfg.Leeway = caddy.Duration(dur)
				}
			}
		case "from_header":
			err = oneArg(d, &cfg.FromHeader)
			if err == nil && !httpguts.ValidHeaderFieldName(cfg.FromHeader) {
				return nil, d.Errf("jwt: from_header %q: not a valid header name", cfg.FromHeader)
			}
		case "from_cookie":
			err = oneArg(d, &cfg.FromCookie)
		case "unverified":
			err = flagArg(d, &cfg.Unverified)
		default:
			return nil, d.Errf("jwt: unrecognized subdirective %q", sub)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(cfg.Algorithms) == 0 {
		return nil, d.Errf("jwt: algorithms is required (such as algorithms RS256)")
	}
	if cfg.FromHeader != "" && cfg.FromCookie != "" {
		return nil, d.Errf("jwt: from_header and from_cookie: give one")
	}
	return cfg, nil
}
