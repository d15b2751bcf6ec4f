package caddymodule

// The warning about X-Forwarded-For that a client writes: a server with
// trusted_proxies but without trusted_proxies_strict takes the leftmost
// address of the header as the client's, and the leftmost address is the
// one the client itself sent, so a client can name any address it likes,
// an exempt one included.

import (
	"reflect"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"go.uber.org/zap"
)

// warnSpoofableClientIP logs a warning for each rule keyed by the client
// address (by ip, ip/N, on_missing_key ip) or with exempt ranges, in a
// server that trusts proxies without trusted_proxies_strict. It runs at
// Start, when the http app's servers and routes are provisioned.
func warnSpoofableClientIP(ctx caddy.Context, logger *zap.Logger) {
	app, err := ctx.AppIfConfigured("http")
	if err != nil {
		return
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return
	}
	for name, srv := range httpApp.Servers {
		if srv.TrustedProxiesStrict > 0 || !TrustsProxies(srv) {
			continue
		}
		eachHandler(srv.Routes, srv.Errors, func(h *Handler) {
			for _, r := range h.rules {
				if r.usesClientIP() {
					logger.Warn("rule keys by the client address or has exempt ranges in a server with trusted_proxies but not trusted_proxies_strict: Caddy then takes the leftmost X-Forwarded-For address, which the client writes, so a client can pick its own address (an exempt one too); set trusted_proxies_strict in the server's options",
						zap.String("rule", r.Name), zap.String("server", name))
				}
			}
		})
	}
}

// usesClientIP reports whether the rule's key or exemptions depend on the
// client's address.
func (ru *rule) usesClientIP() bool {
	if len(ru.exempt) > 0 || ru.OnMissingKey == ruleconfig.MissingIP {
		return true
	}
	for _, src := range ru.keys {
		if src.kind == sourceIP || src.kind == sourceIPPrefix {
			return true
		}
	}
	return false
}

// eachHandler calls f with every rate_limit handler in routes and errors,
// subroutes included.
func eachHandler(routes caddyhttp.RouteList, errors *caddyhttp.HTTPErrorConfig, f func(*Handler)) {
	if errors != nil {
		eachHandler(errors.Routes, nil, f)
	}
	for _, route := range routes {
		for _, mh := range route.Handlers {
			switch h := mh.(type) {
			case *Handler:
				f(h)
			case *caddyhttp.Subroute:
				eachHandler(h.Routes, h.Errors, f)
			}
		}
	}
}

// TrustsProxies reports whether srv has trusted_proxies. Caddy empties the
// exported TrustedProxiesRaw once it has loaded the module, and keeps the
// module in an unexported field, which reflection may still test for nil
// (TestSpoofedForwardedFor fails if a Caddy release renames it).
func TrustsProxies(srv *caddyhttp.Server) bool {
	if srv.TrustedProxiesRaw != nil {
		return true
	}
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	return f.IsValid() && f.Kind() == reflect.Interface && !f.IsNil()
}
