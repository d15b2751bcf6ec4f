package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(UI{})
	httpcaddyfile.RegisterHandlerDirective("rate_limit_ui", parseUI)
	// after the site's own access rules (basic_auth, forward_auth)
	httpcaddyfile.RegisterDirectiveOrder("rate_limit_ui", httpcaddyfile.Before, "respond")
}

// UI is the handler of module http.handlers.rate_limit_ui (directive
// rate_limit_ui): the dashboard and the API it reads, served on any site
// route, behind the site's own authentication, so that it opens from a
// browser's address bar whatever the admin endpoint allows:
//
//	handle /rate-limits/* {
//	    basic_auth { admin $2a$14$… }
//	    rate_limit_ui write
//	}
//
// Every request of the route gets the page, but for the page's own: its
// files (?file=app.js), the rate-limit API (?api=rules/NAME/keys/KEY, the
// routes of /rate_limit/ on the admin endpoint) and, with Write, the
// rate_limit rules of the config (?config=PATH). Query parameters rather
// than paths, so that the handler needs to know nothing of where the route
// mounts it. A write that a browser sent for another site's page is
// refused (foreignWrite).
type UI struct {
	// Write allows resets of keys, per-key overrides (set and removed),
	// and changes of rules (limits, burst, shadow). Changes go to Caddy's own /config/ API on the admin
	// endpoint (AdminAddress), as the admin dashboard's do: a change is a
	// reload that keeps counters. Without Write the page and API are
	// read-only, and the config is not shown. Default: off.
	Write bool `json:"write,omitempty"`

	// AdminAddress is where Caddy's admin endpoint listens, for the
	// changes of Write: host:port. Only the rate_limit rules of the config
	// are read through it and changed. Default: $CADDY_ADMIN, else
	// localhost:2019 (Caddy's default).
	AdminAddress string `json:"admin_address,omitempty"`

	client *http.Client
}

// CaddyModule returns the Caddy module information.
func (UI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.rate_limit_ui",
		New: func() caddy.Module { return new(UI) },
	}
}

// Provision fills the admin address.
func (u *UI) Provision(caddy.Context) error {
	if u.AdminAddress == "" {
		u.AdminAddress = os.Getenv("CADDY_ADMIN")
	}
	if u.AdminAddress == "" {
		u.AdminAddress = caddy.DefaultAdminListen
	}
	u.client = &http.Client{Timeout: 30 * time.Second}
	return nil
}

// siteIndex is the dashboard's page as a site serves it, read-only
// ([0]) and with Write ([1]): its files by query, and marked data-site, so
// that the script asks the site's API, and data-write with Write, so that
// it shows the controls that change things (an override's form).
var siteIndex = [2]dashboardFile{siteIndexFor(false), siteIndexFor(true)}

// siteIndexFor is siteIndex's page, with Write if write.
func siteIndexFor(write bool) dashboardFile {
	f := dashboardFiles["index.html"]
	mark, tag := "data-site", "-site"
	if write {
		mark, tag = "data-site data-write", "-site-write"
	}
	body := bytes.Replace(f.body, []byte(`href="app.css"`), []byte(`href="?file=app.css"`), 1)
	body = bytes.Replace(body, []byte(`src="app.js"`), []byte(`src="?file=app.js"`), 1)
	body = bytes.Replace(body, []byte(`<html lang="en">`), []byte(`<html lang="en" `+mark+`>`), 1)
	return dashboardFile{body: body, contentType: f.contentType, etag: strings.TrimSuffix(f.etag, `"`) + tag + `"`}
}

// index is the page u serves.
func (u *UI) index() dashboardFile {
	if u.Write {
		return siteIndex[1]
	}
	return siteIndex[0]
}

// ServeHTTP serves the page, its files, the API and the config view.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	q := r.URL.Query()
	err := foreignWrite(r)
	switch {
	case err != nil:
	case q.Has("api"):
		err = u.serveAPI(w, r, q.Get("api"))
	case q.Has("config"):
		err = u.serveConfig(w, r, q.Get("config"))
	case q.Has("file"):
		name := q.Get("file")
		if f, ok := dashboardFiles[name]; ok && name != "index.html" {
			err = serveFile(w, r, name, f)
		} else {
			err = apiError(http.StatusNotFound, "no such file: %s", name)
		}
	default:
		err = serveFile(w, r, "index.html", u.index())
	}
	var ae caddy.APIError
	if errors.As(err, &ae) {
		// as the admin endpoint answers: the page reads {"error": …}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ae.HTTPStatus)
		return json.NewEncoder(w).Encode(map[string]string{"error": ae.Err.Error()})
	}
	return err
}

// foreignWrite refuses (403) a write, any method but GET and HEAD, that a
// browser sent for a page of another origin: with Sec-Fetch-Site
// cross-site or same-site (a sibling host, which may serve pages the
// site's operators do not control), or with an Origin header that is not
// the site's own (siteOrigin). The dashboard's own page sends same-origin
// and its origin; a client that is not a browser (curl) sends neither and
// passes, as it has the site's credentials to give anyway. The site's
// authentication still applies: this stops a page elsewhere from using a
// logged-in operator's browser (its basic_auth credentials, its cookies).
func foreignWrite(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return apiError(http.StatusForbidden, "%s from another site (Sec-Fetch-Site: %s): the dashboard changes only from its own page", r.Method, site)
	}
	if origins, ok := r.Header["Origin"]; ok && (len(origins) != 1 || !siteOrigin(origins[0], r)) {
		return apiError(http.StatusForbidden, "%s from origin %q: the dashboard changes only from its own page", r.Method, strings.Join(origins, ", "))
	}
	return nil
}

// siteOrigin is true if origin is the site's that r came to: r's host,
// with r's scheme, or https for a request Caddy got over plain HTTP (from
// a proxy in front that ends TLS), never the other way round. A default
// port is the same as none.
func siteOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if u.Scheme != scheme && (u.Scheme != "https" || scheme != "http") {
		return false
	}
	return strings.EqualFold(withoutDefaultPort(u.Host, u.Scheme), withoutDefaultPort(r.Host, u.Scheme))
}

// withoutDefaultPort is host without the default port of scheme.
func withoutDefaultPort(host, scheme string) string {
	if scheme == "https" {
		return strings.TrimSuffix(host, ":443")
	}
	return strings.TrimSuffix(host, ":80")
}

// serveAPI answers a route of the rate-limit admin API: rest is its path
// after /rate_limit/ (percent-encoded segments), with its query.
func (u *UI) serveAPI(w http.ResponseWriter, r *http.Request, rest string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !u.Write {
		return apiError(http.StatusForbidden, "this dashboard is read-only: resets and overrides need rate_limit_ui write")
	}
	escaped, rawQuery, _ := strings.Cut(rest, "?")
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return apiError(http.StatusBadRequest, "api path %q: %v", rest, err)
	}
	inner := r.Clone(r.Context())
	inner.URL = &url.URL{Path: adminPrefix + p, RawPath: adminPrefix + escaped, RawQuery: rawQuery}
	inner.RequestURI = inner.URL.RequestURI()
	return serveAdmin(w, inner)
}

// serveConfig reads (GET) or changes (PATCH) the config through the admin
// endpoint's /config/, with Write only: GET answers the config with all
// but the rate_limit handlers' rules left out (objects dropped, array
// items null, so that paths stay those of the whole config), and PATCH
// changes one rule (a path ending in rules/N of a rate_limit handler).
func (u *UI) serveConfig(w http.ResponseWriter, r *http.Request, path string) error {
	if !u.Write {
		return apiError(http.StatusForbidden, "this dashboard is read-only: changes need rate_limit_ui write")
	}
	if err := allowMethods(w, r, http.MethodGet, http.MethodPatch); err != nil {
		return err
	}
	full, etag, err := u.adminGet()
	if err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		if path != "" {
			return apiError(http.StatusNotFound, "only the whole config view is read here")
		}
		w.Header().Set("Etag", etag)
		return writeJSON(w, rulesOnly(full))
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if !isRulePath(full, segs) {
		return apiError(http.StatusForbidden, "%s is not a rule of a rate_limit handler: only rules change here", path)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPatch, u.adminURL("/config/"+strings.Join(segs, "/")), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if m := r.Header.Get("If-Match"); m != "" {
		req.Header.Set("If-Match", m)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return apiError(http.StatusBadGateway, "the admin endpoint at %s: %v", u.AdminAddress, err)
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Etag"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, err = io.Copy(w, resp.Body)
	return err
}

// adminURL is the admin endpoint's URL of path.
func (u *UI) adminURL(path string) string {
	return "http://" + u.AdminAddress + path
}

// adminGet reads the whole config, and its Etag, from the admin endpoint.
func (u *UI) adminGet() (any, string, error) {
	resp, err := u.client.Get(u.adminURL("/config/"))
	if err != nil {
		return nil, "", apiError(http.StatusBadGateway, "the admin endpoint at %s: %v", u.AdminAddress, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, "", apiError(http.StatusBadGateway, "the admin endpoint at %s: %s: %s", u.AdminAddress, resp.Status, bytes.TrimSpace(msg))
	}
	var cfg any
	if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
		return nil, "", apiError(http.StatusBadGateway, "the admin endpoint's config: %v", err)
	}
	return cfg, resp.Header.Get("Etag"), nil
}

// rulesOnly is v with everything but the rate_limit handlers (their
// handler and rules fields) left out: null in arrays, dropped from
// objects; nil if v holds none.
func rulesOnly(v any) any {
	switch v := v.(type) {
	case []any:
		out, kept := make([]any, len(v)), false
		for i, x := range v {
			out[i] = rulesOnly(x)
			kept = kept || out[i] != nil
		}
		if kept {
			return out
		}
	case map[string]any:
		if v["handler"] == "rate_limit" {
			if rules, ok := v["rules"]; ok {
				return map[string]any{"handler": "rate_limit", "rules": rules}
			}
		}
		out := make(map[string]any)
		for k, x := range v {
			if y := rulesOnly(x); y != nil {
				out[k] = y
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// isRulePath is true if segs name one rule of a rate_limit handler in cfg:
// …/rules/N, the object at … having handler rate_limit.
func isRulePath(cfg any, segs []string) bool {
	n := len(segs)
	if n < 2 || segs[n-2] != "rules" {
		return false
	}
	v := cfg
	for i, s := range segs {
		if i == n-2 {
			h, ok := v.(map[string]any)
			if !ok || h["handler"] != "rate_limit" {
				return false
			}
		}
		switch x := v.(type) {
		case map[string]any:
			v = x[s]
		case []any:
			var idx int
			if _, err := fmt.Sscanf(s, "%d", &idx); err != nil || idx < 0 || idx >= len(x) || fmt.Sprint(idx) != s {
				return false
			}
			v = x[idx]
		default:
			return false
		}
	}
	_, ok := v.(map[string]any)
	return ok
}

// parseUI reads `rate_limit_ui [write] { write  admin_address ADDR }`.
func parseUI(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	u := new(UI)
	d := h.Dispenser
	d.Next() // the directive
	for d.NextArg() {
		if d.Val() != "write" {
			return nil, d.Errf("rate_limit_ui %s: the only argument is write", d.Val())
		}
		u.Write = true
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "write":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			u.Write = true
		case "admin_address":
			if !d.AllArgs(&u.AdminAddress) {
				return nil, d.ArgErr()
			}
		default:
			return nil, d.Errf("unrecognized subdirective %q", d.Val())
		}
	}
	return u, nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*UI)(nil)
	_ caddyhttp.MiddlewareHandler = (*UI)(nil)
)
