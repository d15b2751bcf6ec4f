package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/edgebyte/edgelimit/caddymodule"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI is the admin router of module admin.api.rate_limit: live state
// of the rules under /rate_limit/ on Caddy's admin endpoint. Reading takes
// each rule's locks only as long as one key's decision does, so it never
// holds up requests.
//
//	GET    /rate_limit/                            every rule: config, limits, keys, evictions, totals; the snapshots' last write
//	GET    /rate_limit/rules/{rule}                one rule, as above
//	GET    /rate_limit/rules/{rule}/keys?top=N&by=requests|denied
//	GET    /rate_limit/rules/{rule}/keys/{key}     a key's state per limit
//	DELETE /rate_limit/rules/{rule}/keys/{key}     reset a key and lift its block, on every node of a cluster
//	GET    /rate_limit/rules/{rule}/blocked        the keys blocked now (block_for), at most 100
//	GET    /rate_limit/rules/{rule}/overrides      the per-key overrides in force, sorted by key, and max_overrides
//	PUT    /rate_limit/rules/{rule}/keys/{key}/override  {"factor": F, "expires_in": "24h"}: the key's limits × F (0 refuses it), at once, on every node; 200 with it
//	DELETE /rate_limit/rules/{rule}/keys/{key}/override  remove it: 204, or 404 if the key has none
//	GET    /rate_limit/cluster                     members, hot keys' shares, gossip traffic
//	GET    /rate_limit/ui/                         the dashboard (admin_dashboard.go)
//
// Rule names and keys are path segments, percent-encoded. An override's
// errors: 404 for an unknown rule; 400 with the reason for a factor
// missing, < 0 or not finite, an expires_in that does not parse or is not
// positive, a key longer than the rule keeps, bad JSON; 409 past the
// rule's max_overrides.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.rate_limit",
		New: func() caddy.Module { return adminAPI{} },
	}
}

// adminPrefix is the path of the routes.
const adminPrefix = "/rate_limit/"

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	routes := []caddy.AdminRoute{{Pattern: adminPrefix, Handler: caddy.AdminHandlerFunc(serveAdmin)}}
	return append(routes, dashboardRoutes()...)
}

// Defaults and bounds of the top-keys route.
const (
	defaultTop = 10
	maxTop     = 1000
)

// serveAdmin routes an admin request.
func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	parts, err := pathSegments(strings.TrimPrefix(r.URL.EscapedPath(), adminPrefix))
	if err != nil {
		return apiError(http.StatusBadRequest, "%v", err)
	}
	switch {
	case len(parts) == 0:
		if err := allowMethods(w, r, http.MethodGet); err != nil {
			return err
		}
		return writeJSON(w, overview())
	case len(parts) == 1 && parts[0] == "cluster":
		if err := allowMethods(w, r, http.MethodGet); err != nil {
			return err
		}
		return writeJSON(w, describeCluster())
	case parts[0] == "rules" && len(parts) >= 2 && len(parts) <= 5:
		e, ok := caddymodule.RuleInForce(parts[1])
		if !ok {
			return apiError(http.StatusNotFound, "no rule named %q", parts[1])
		}
		switch {
		case len(parts) == 2:
			if err := allowMethods(w, r, http.MethodGet); err != nil {
				return err
			}
			return writeJSON(w, describeRule(e))
		case parts[2] == "blocked" && len(parts) == 3:
			if err := allowMethods(w, r, http.MethodGet); err != nil {
				return err
			}
			return serveBlocked(w, r, e) // admin_blocks.go
		case parts[2] == "overrides" && len(parts) == 3:
			if err := allowMethods(w, r, http.MethodGet); err != nil {
				return err
			}
			return serveOverrides(w, e) // overrides.go
		case parts[2] != "keys":
		case len(parts) == 5:
			if parts[4] == "override" {
				return serveOverride(w, r, e, parts[3]) // overrides.go
			}
		case len(parts) == 3:
			if err := allowMethods(w, r, http.MethodGet); err != nil {
				return err
			}
			return serveTopKeys(w, r, e)
		default:
			if err := allowMethods(w, r, http.MethodGet, http.MethodDelete); err != nil {
				return err
			}
			if r.Method == http.MethodDelete {
				return resetKey(w, e, parts[3])
			}
			return serveKey(w, e, parts[3], r.URL.Query().Get("tier"))
		}
	}
	return apiError(http.StatusNotFound, "no such route: %s (see GET %s)", r.URL.Path, adminPrefix)
}

// pathSegments splits an escaped path into its unescaped segments: "a%2Fb/c"
// is "a/b" and "c". An empty path has none; a trailing slash is ignored.
func pathSegments(escaped string) ([]string, error) {
	escaped = strings.TrimSuffix(escaped, "/")
	if escaped == "" {
		return nil, nil
	}
	parts := strings.Split(escaped, "/")
	for i, p := range parts {
		s, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("path segment %q: %v", p, err)
		}
		parts[i] = s
	}
	return parts, nil
}

// allowMethods answers 405 unless r's method is one of methods.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) error {
	for _, m := range methods {
		if r.Method == m {
			return nil
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	return apiError(http.StatusMethodNotAllowed, "method %s not allowed; use %s", r.Method, strings.Join(methods, " or "))
}

// apiError is an admin API error with a status and a message.
func apiError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// writeJSON answers 200 with v as JSON.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "\t")
	return enc.Encode(v)
}

// serveTopKeys answers the busiest (by=requests, units asked for) or
// most-denied (by=denied) keys of a rule.
func serveTopKeys(w http.ResponseWriter, r *http.Request, e caddymodule.RuleState) error {
	q := r.URL.Query()
	n := defaultTop
	if s := q.Get("top"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxTop {
			return apiError(http.StatusBadRequest, "top=%q: want a whole number from 1 to %d", s, maxTop)
		}
		n = v
	}
	by := q.Get("by")
	if by == "" {
		by = "requests"
	}
	view := topKeysView{Rule: e.Name(), By: by, Keys: []topKey{}}
	switch by {
	case "requests":
		view.Total = e.Busiest().Total()
		view.addEntries(e.Busiest().Top(n))
	case "denied":
		if d := e.MostDenied(); d != nil {
			view.Total = d.Total()
			view.addEntries(d.Top(n))
		}
	default:
		return apiError(http.StatusBadRequest, "by=%q: want requests or denied", by)
	}
	return writeJSON(w, view)
}

// serveKey answers a key's state.
func serveKey(w http.ResponseWriter, e caddymodule.RuleState, key, tier string) error {
	if st := e.Redis(); st != nil {
		return serveStoreKey(w, e, st, key)
	}
	if n, _ := inFlightOf(e, key); n == 0 && !e.Limiter().Contains(key) && !hasBlock(e, key) {
		return apiError(http.StatusNotFound, "rule %q has no state for key %q (never seen, idle and swept, or evicted)", e.Name(), key)
	}
	if _, ok := e.Config().Tiers[tier]; tier != "" && !ok {
		return apiError(http.StatusNotFound, "rule %q has no tier %q", e.Name(), tier)
	}
	v := describeKey(e, key, tier)
	withBlock(&v, e, key, time.Now())
	return writeJSON(w, v)
}

// resetKey forgets a key's state: its next request starts afresh. A rule
// with scope cluster forgets it on every node reachable; a key this node
// never saw is still reset on the others.
func resetKey(w http.ResponseWriter, e caddymodule.RuleState, key string) error {
	if st := e.Redis(); st != nil {
		return resetStoreKey(w, e, st, key)
	}
	found := e.Forget(key)
	v := resetView{Rule: e.Name(), Key: key, Reset: found}
	if n := caddymodule.ClusterNode(); n != nil && e.Clustered() {
		v.Cluster = true
		if err := n.Cluster.BroadcastReset(e.Name(), key); err != nil {
			v.ClusterError = err.Error()
		}
	} else if !found {
		return apiError(http.StatusNotFound, "rule %q has no state for key %q", e.Name(), key)
	}
	return writeJSON(w, v)
}

// Interface guards
var _ caddy.AdminRouter = adminAPI{}
