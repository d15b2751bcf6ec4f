package replay

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The routes of a replay, compiled once. Caddy's RouteList.Compile
// builds the chain of a matched route's handlers again for every request
// (a closure a handler), and a subroute compiles its routes on every
// request: most of the cost of a replayed line. Here every route's chain
// is built once, as the next handler after any position of the list is
// always the same: the rest of the list (or, after a terminal route, the
// end Caddy puts there). What a request goes through is Caddy's
// (wrapRoute, Subroute.ServeHTTP of v2.11): the route group, the matcher
// sets and their errors, terminal routes, a subroute's error routes.

// compileRoutes chains routes in front of next.
func compileRoutes(routes caddyhttp.RouteList, next caddyhttp.Handler) caddyhttp.Handler {
	for i := len(routes) - 1; i >= 0; i-- {
		rt := &routes[i]
		end := next
		if rt.Terminal {
			end = terminalEnd
		}
		next = &route{rt: rt, next: next, chain: compileHandlers(rt.Handlers, end)}
	}
	return next
}

// compileHandlers chains a route's handlers in front of next; a subroute's
// routes are compiled in its place.
func compileHandlers(hs []caddyhttp.MiddlewareHandler, next caddyhttp.Handler) caddyhttp.Handler {
	for i := len(hs) - 1; i >= 0; i-- {
		if sr, ok := hs[i].(*caddyhttp.Subroute); ok {
			s := &subroute{sr: sr, routes: compileRoutes(sr.Routes, next)}
			if sr.Errors != nil {
				s.errors = compileRoutes(sr.Errors.Routes, next)
			}
			next = s
			continue
		}
		next = &handler{h: hs[i], next: next}
	}
	return next
}

// route is a compiled route: its handlers if the request matches, else
// the rest of the list.
type route struct {
	rt    *caddyhttp.Route
	next  caddyhttp.Handler // the rest of the list
	chain caddyhttp.Handler // the route's handlers, then next or terminalEnd
}

func (ro *route) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	var groups map[string]struct{}
	if g := ro.rt.Group; g != "" {
		groups = r.Context().Value(routeGroupCtxKey).(map[string]struct{})
		if _, ok := groups[g]; ok {
			return ro.next.ServeHTTP(w, r) // the group's route was taken
		}
	}
	match, err := ro.rt.MatcherSets.AnyMatchWithError(r)
	if err != nil {
		return err
	}
	if !match {
		return ro.next.ServeHTTP(w, r)
	}
	if groups != nil {
		groups[ro.rt.Group] = struct{}{}
	}
	return ro.chain.ServeHTTP(w, r)
}

// routeGroupCtxKey is caddyhttp's (unexported) key of the route groups
// taken by a request.
const routeGroupCtxKey = caddy.CtxKey("route_group")

// handler is one handler of a compiled route and what follows it.
type handler struct {
	h    caddyhttp.MiddlewareHandler
	next caddyhttp.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	return h.h.ServeHTTP(w, r, h.next)
}

// subroute is a compiled subroute: its routes, then what follows it; its
// error routes if they fail.
type subroute struct {
	sr     *caddyhttp.Subroute
	routes caddyhttp.Handler
	errors caddyhttp.Handler // nil: no error routes
}

func (s *subroute) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	err := s.routes.ServeHTTP(w, r)
	if err != nil && s.errors != nil {
		return s.errors.ServeHTTP(w, s.sr.Errors.WithError(r, err))
	}
	return err
}

// terminalEnd is what Caddy puts after a terminal route: nothing more is
// run; in error routes, the error's status is written.
var terminalEnd = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	herr, isErr := r.Context().Value(caddyhttp.ErrorCtxKey).(error)
	if !isErr {
		caddyhttp.SetVar(r.Context(), "unhandled", true)
		return nil
	}
	if he, ok := herr.(caddyhttp.HandlerError); ok {
		w.WriteHeader(he.StatusCode)
	} else {
		w.WriteHeader(http.StatusInternalServerError)
	}
	return nil
})
