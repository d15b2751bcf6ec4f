package replay

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
)

// lineRequest is the one http.Request a server's replay serves every line
// with, set up as caddyhttp.PrepareRequest sets up a live request (the
// context values a handler or a placeholder reads), but once: each line
// resets its fields instead of allocating a request, a context chain of
// six values, two maps and the placeholders' closures (most of the cost
// of a replayed line after the routes).
//
// What a handler sees is what PrepareRequest gives it: the replacer (a
// new one a line, its {http.*} placeholders those of the request), the
// server, the vars (client_ip, trusted_proxy, start_time = the line's
// start), the route groups, the original request, the extra log fields.
type lineRequest struct {
	req  *http.Request      // the request the {http.*} placeholders read
	tmpl http.Request       // req as prepared: its context and nothing else
	ctx  lineContext        // req's context
	http caddy.ReplacerFunc // the {http.*} placeholders of req

	srv     *caddyhttp.Server
	proxies bool           // the server has trusted_proxies
	ranges  []netip.Prefix // their ranges, if static (staticRanges)
	w       http.ResponseWriter
}

// newLineRequest prepares the request of srv's lines, answering to w.
func newLineRequest(srv *caddyhttp.Server, w http.ResponseWriter) *lineRequest {
	l := &lineRequest{srv: srv, w: w, proxies: caddymodule.TrustsProxies(srv) || srv.TrustedProxiesUnix, ranges: staticRanges(srv)}
	base := caddy.NewReplacer()
	req := caddyhttp.PrepareRequest(&http.Request{URL: &url.URL{}, Header: http.Header{}, Body: http.NoBody}, base, w, srv)
	l.ctx = lineContext{Context: context.Background(), srv: srv, vars: make(map[string]any), groups: make(map[string]struct{})}
	// the placeholders' closure holds req: req itself is kept, its
	// context replaced
	*req = *req.WithContext(&l.ctx)
	l.req, l.tmpl, l.http = req, *req, base.Get
	return l
}

// reset makes the request that of e, its URI parsed as u, and returns it.
func (l *lineRequest) reset(e *accesslog.Entry, u *url.URL) *http.Request {
	r := l.req
	*r = l.tmpl
	r.Method, r.URL, r.Proto, r.Header, r.Host = e.Method, u, e.Proto, e.Header, e.Host
	r.RemoteAddr, r.RequestURI, r.Body = e.Remote, e.URI, http.NoBody
	r.ProtoMajor, r.ProtoMinor, _ = http.ParseHTTPVersion(e.Proto)
	if r.RemoteAddr == "" {
		r.RemoteAddr = net.JoinHostPort(e.Client, "0")
	}

	c := &l.ctx
	c.repl = caddy.NewReplacer()
	c.repl.Map(l.http)
	clear(c.groups)
	c.extra = nil
	c.origURL = *u
	c.orig = http.Request{Method: r.Method, RemoteAddr: r.RemoteAddr, RequestURI: r.RequestURI, URL: &c.origURL}
	clear(c.vars)
	trusted, client := l.client(r, e.Client)
	c.vars[caddyhttp.TrustedProxyVarKey] = trusted
	c.vars[caddyhttp.ClientIPVarKey] = client
	c.vars["start_time"] = e.Start
	return r
}

// client is whether r's peer is a trusted proxy, as caddyhttp's
// determineTrustedProxy finds, and the client: the logged one (the client
// the live rules saw, whatever trusted_proxies says), else the one Caddy
// finds. Without trusted_proxies, or with static ranges, this is Caddy's
// test of the peer's address; with another source of ranges, or no
// logged client behind trusted proxies, Caddy's own code decides (a
// request prepared for it alone).
func (l *lineRequest) client(r *http.Request, logged string) (trusted bool, client string) {
	if l.proxies && (l.ranges == nil || logged == "" || r.RemoteAddr == "@") {
		probe := caddyhttp.PrepareRequest(&http.Request{Header: r.Header, RemoteAddr: r.RemoteAddr, URL: r.URL}, caddy.NewReplacer(), l.w, l.srv)
		trusted, _ = caddyhttp.GetVar(probe.Context(), caddyhttp.TrustedProxyVarKey).(bool)
		client, _ = caddyhttp.GetVar(probe.Context(), caddyhttp.ClientIPVarKey).(string)
		return trusted, cmp.Or(logged, client)
	}
	if !l.proxies && logged != "" {
		return false, logged
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false, logged
	}
	host, _, _ = strings.Cut(host, "%")
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, logged
	}
	trusted = slices.ContainsFunc(l.ranges, func(p netip.Prefix) bool { return p.Contains(ip) })
	if logged != "" {
		return trusted, logged
	}
	return trusted, ip.String()
}

// staticRanges are the ranges of srv's trusted_proxies if they are
// static (trusted_proxies static …), read as Caddy provisioned them; nil
// for another source, or none. Caddy keeps the source in an unexported
// field (caddymodule.TrustsProxies reads it too): if a release renames it,
// every line is decided by Caddy's own code, only slower.
func staticRanges(srv *caddyhttp.Server) []netip.Prefix {
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	if !f.IsValid() || f.Kind() != reflect.Interface || f.IsNil() || f.Elem().Type() != reflect.TypeFor[*caddyhttp.StaticIPRange]() {
		return nil
	}
	rs := f.Elem().Elem().FieldByName("Ranges")
	out := make([]netip.Prefix, 0, rs.Len())
	for i := range rs.Len() {
		p, err := caddyhttp.CIDRExpressionToPrefix(rs.Index(i).String())
		if err != nil {
			return nil
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// lineContext is the context of a lineRequest: the values PrepareRequest
// puts in a live request's, of the line being replayed.
type lineContext struct {
	context.Context // background
	repl            *caddy.Replacer
	srv             *caddyhttp.Server
	vars            map[string]any
	groups          map[string]struct{}
	orig            http.Request // the request before any handler changed it
	origURL         url.URL
	extra           *caddyhttp.ExtraLogFields // made when first asked for
}

// Value is the value of key, as PrepareRequest's context chain has it.
func (c *lineContext) Value(key any) any {
	switch key {
	case caddy.ReplacerCtxKey:
		return c.repl
	case caddyhttp.ServerCtxKey:
		return c.srv
	case caddyhttp.VarsCtxKey:
		return c.vars
	case routeGroupCtxKey:
		return c.groups
	case caddyhttp.OriginalRequestCtxKey:
		return c.orig
	case caddyhttp.ExtraLogFieldsCtxKey:
		if c.extra == nil {
			c.extra = new(caddyhttp.ExtraLogFields)
		}
		return c.extra
	}
	return c.Context.Value(key)
}
