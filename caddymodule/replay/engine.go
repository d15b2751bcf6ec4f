package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule"
	"github.com/edgebyte/edgelimit/caddymodule/replay/accesslog"
)

// Replayer serves logged requests through a config's own routes and
// rate_limit handlers on the log's clock (caddymodule.Virtual), with the
// handlers that would reach past Caddy (reverse_proxy, file_server, …)
// replaced: see stand-ins.go. It is not safe for concurrent use: requests
// are replayed one at a time, in the log's order.
type Replayer struct {
	ctx     caddy.Context // the config's, to compile routes with their stand-ins
	virtual caddymodule.Virtual
	report  *Report
	servers []*server          // by name
	byLog   map[string]*server // access logger name → the server that logs to it
	cur     *accesslog.Entry   // the request being replayed, for the stand-ins
	rec     recorder
}

// server is one of the config's HTTP servers, its routes compiled with
// the stand-ins.
type server struct {
	name  string
	srv   *caddyhttp.Server
	chain caddyhttp.Handler
	line  *lineRequest // the request its lines are served with
	ports []uint       // the ports it listens on
}

// Load adapts the config file (as `caddy adapt` does: adapter "" guesses
// from the file name), provisions it in this process as `caddy validate`
// does (no port bound, no app started, Caddy's own logs at error level
// only), and puts every rate_limit handler under a virtual clock.
func Load(configFile, adapter string) (*Replayer, error) {
	input, _, _, err := caddycmd.LoadConfig(configFile, adapter)
	if err != nil {
		return nil, err
	}
	if len(input) == 0 {
		return nil, fmt.Errorf("%s: no config", configFile)
	}
	var cfg *caddy.Config
	if err := caddy.StrictUnmarshalJSON(caddy.RemoveMetaFields(input), &cfg); err != nil {
		return nil, fmt.Errorf("decoding config: %v", err)
	}
	// the config's logs are not opened: its access log is what is being
	// read, and must not be written to
	cfg.Logging = &caddy.Logging{Logs: map[string]*caddy.CustomLog{"default": {BaseLog: caddy.BaseLog{Level: "ERROR"}}}}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	if err := persistOff(cfg); err != nil {
		return nil, err
	}
	ctx, err := caddy.ProvisionContext(cfg)
	if err != nil {
		return nil, err
	}
	app, err := ctx.App("http")
	if err != nil {
		return nil, err
	}
	return newReplayer(ctx, app.(*caddyhttp.App))
}

// persistOff turns the rate_limit app's snapshots off in cfg: a replay
// starts from no counters, and must neither read the counters a live
// Caddy of the same config left in the storage nor overwrite them.
func persistOff(cfg *caddy.Config) error {
	app := map[string]any{}
	if raw := cfg.AppsRaw["rate_limit"]; raw != nil {
		if err := json.Unmarshal(raw, &app); err != nil {
			return fmt.Errorf("decoding the rate_limit app: %v", err)
		}
	}
	delete(app, "persist_interval")
	app["persist_off"] = true
	if cfg.AppsRaw == nil {
		cfg.AppsRaw = caddy.ModuleMap{}
	}
	cfg.AppsRaw["rate_limit"] = caddyconfig.JSON(app, nil)
	return nil
}

// newReplayer puts the servers of a provisioned http app under replay.
func newReplayer(ctx caddy.Context, app *caddyhttp.App) (*Replayer, error) {
	r := &Replayer{ctx: ctx, report: newReport(), byLog: make(map[string]*server)}
	r.virtual.Observer = r.report
	r.rec.h = make(http.Header)
	names := make([]string, 0, len(app.Servers))
	for name := range app.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	ambiguous := make(map[string]bool)
	for _, name := range names {
		srv := app.Servers[name]
		s := &server{name: name, srv: srv, line: newLineRequest(srv, &r.rec)}
		r.standIn(srv.Routes)
		for _, nr := range srv.NamedRoutes {
			r.standInRoute(nr)
		}
		if srv.Errors != nil {
			r.standIn(srv.Errors.Routes)
		}
		s.chain = compileRoutes(srv.Routes, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
		for _, l := range srv.Listen {
			if na, err := caddy.ParseNetworkAddress(l); err == nil {
				for p := na.StartPort; p <= na.EndPort && p-na.StartPort < 1024; p++ {
					s.ports = append(s.ports, p)
				}
			}
		}
		for _, logger := range loggerNames(srv.Logs) {
			if _, taken := r.byLog[logger]; taken {
				ambiguous[logger] = true
			}
			r.byLog[logger] = s
		}
		r.servers = append(r.servers, s)
	}
	for logger := range ambiguous {
		delete(r.byLog, logger)
	}
	if len(r.servers) == 0 {
		return nil, errors.New("the config has no HTTP server")
	}
	if len(r.report.rules) == 0 {
		return nil, errors.New("the config has no rate_limit rule")
	}
	return r, nil
}

// loggerNames are the access loggers a server writes to.
func loggerNames(l *caddyhttp.ServerLogConfig) []string {
	if l == nil {
		return nil
	}
	name := func(n string) string {
		if n == "" {
			return "http.log.access"
		}
		return "http.log.access." + n
	}
	out := []string{name(l.DefaultLoggerName)}
	for _, ns := range l.LoggerNames {
		for _, n := range ns {
			out = append(out, name(n))
		}
	}
	return out
}

// serverFor is the server that served e: the one writing to e's logger,
// else the one listening on the Host's port (80 without one), else the
// first by name.
func (r *Replayer) serverFor(e *accesslog.Entry) *server {
	if s, ok := r.byLog[e.Logger]; ok {
		return s
	}
	if len(r.servers) == 1 {
		return r.servers[0]
	}
	port := uint(80)
	if i := strings.LastIndexByte(e.Host, ':'); i >= 0 && !strings.HasSuffix(e.Host, "]") {
		var p uint
		if _, err := fmt.Sscan(e.Host[i+1:], &p); err == nil {
			port = p
		}
	}
	for _, s := range r.servers {
		for _, p := range s.ports {
			if p == port {
				return s
			}
		}
	}
	return r.servers[0]
}

// Replay serves e through its server's routes at e's start and counts the
// outcome. A request whose URI does not parse is counted as skipped.
func (r *Replayer) Replay(e *accesslog.Entry) {
	u, err := url.ParseRequestURI(e.URI)
	if err != nil {
		r.report.Skipped++
		return
	}
	s := r.serverFor(e)
	r.rec.reset()
	req := s.line.reset(e, u)
	r.virtual.Now, r.cur = e.Start, e
	r.report.begin(e)
	status := http.StatusOK
	if err := s.chain.ServeHTTP(&r.rec, req); err != nil {
		// a refusal is an error, for handle_errors: its status
		status = http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
	} else if r.rec.status != 0 {
		status = r.rec.status
	}
	r.report.served(e, status)
}

// Report is what the replay found so far.
func (r *Replayer) Report() *Report { return r.report }

// recorder is the response writer of a replayed request: the status and
// the headers, the body dropped.
type recorder struct {
	h      http.Header
	status int
}

func (w *recorder) reset() {
	clear(w.h)
	w.status = 0
}

func (w *recorder) Header() http.Header { return w.h }

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
