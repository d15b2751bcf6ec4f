package replay

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule"
)

// What a replay runs of a config's handlers. The rate_limit handlers and
// those that route or set what a rule may read run as configured; those
// that answer a request (proxy, files, a static response) are replaced by
// a stand-in that answers with the logged status, so no upstream is
// called; every other handler (encode, authentication, templates, a
// third-party one) is passed through, as if it let the request on.
var (
	// kept are the handlers a replay runs as configured: they route the
	// request, or set what a rule's match or key reads, and do no I/O.
	kept = map[string]bool{
		"http.handlers.vars":    true,
		"http.handlers.map":     true,
		"http.handlers.rewrite": true,
		"http.handlers.headers": true,
		"http.handlers.invoke":  true,
	}
	// answering are the handlers that answer a request: replaced by a
	// stand-in that answers with the logged status.
	answering = map[string]bool{
		"http.handlers.reverse_proxy":   true,
		"http.handlers.file_server":     true,
		"http.handlers.static_response": true,
		"http.handlers.error":           true,
		"http.handlers.acme_server":     true,
		"http.handlers.metrics":         true,
		"http.handlers.copy_response":   true,
		"http.handlers.rate_limit_ui":   true,
	}
)

// standIn puts the routes' handlers under replay: rate_limit under the
// virtual clock, subroutes walked, the others kept or replaced.
func (r *Replayer) standIn(routes caddyhttp.RouteList) {
	for i := range routes {
		r.standInRoute(&routes[i])
	}
}

func (r *Replayer) standInRoute(rt *caddyhttp.Route) {
	defer r.recompile(rt)
	for j, h := range rt.Handlers {
		switch h := h.(type) {
		case *caddymodule.Handler:
			r.report.addRules(h.Replay(&r.virtual))
			continue
		case *caddyhttp.Subroute:
			r.standIn(h.Routes)
			if h.Errors != nil {
				r.standIn(h.Errors.Routes)
			}
			continue
		}
		id := ""
		if m, ok := h.(caddy.Module); ok {
			id = string(m.CaddyModule().ID)
		}
		switch {
		case kept[id]:
		case answering[id]:
			rt.Handlers[j] = answer{r}
		default:
			rt.Handlers[j] = passThrough{}
		}
	}
}

// recompile makes rt's chain again from its handlers: a route compiles
// its handlers when provisioned, and serves that chain, not Handlers.
// The handlers were loaded already: only the chain is made.
func (r *Replayer) recompile(rt *caddyhttp.Route) {
	rt.HandlersRaw = nil
	if err := rt.ProvisionHandlers(r.ctx, nil); err != nil {
		panic("replay: recompiling a route of loaded handlers: " + err.Error()) // loads nothing: cannot fail
	}
}

// answer stands in for a handler that answers: it answers with the
// status the log has, and calls nothing. A logged 429 becomes 200: the
// replay let through a request the live run refused, and what the
// upstream would have answered is not in the log.
type answer struct{ r *Replayer }

func (a answer) ServeHTTP(w http.ResponseWriter, _ *http.Request, _ caddyhttp.Handler) error {
	status := http.StatusOK
	if e := a.r.cur; e != nil && e.Status >= 100 && e.Status != http.StatusTooManyRequests {
		status = e.Status
	}
	w.WriteHeader(status)
	return nil
}

// passThrough stands in for a handler that would let the request on.
type passThrough struct{}

func (passThrough) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}
