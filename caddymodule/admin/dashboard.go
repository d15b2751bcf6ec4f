package admin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The dashboard: a page on the admin endpoint, at /rate_limit/ui/, that
// shows the rules live and changes them. Its files are embedded in the
// binary; they load nothing from any other host. The page reads the admin
// API beside it and changes rules through Caddy's /config/ API, with
// relative URLs: it works wherever the admin endpoint is reached.

// dashboardPrefix is the path of the dashboard on the admin endpoint.
const dashboardPrefix = adminPrefix + "ui/"

//go:embed dashboard
var dashboardFS embed.FS

// dashboardTypes are the content types of the dashboard's files, by
// extension; a file of another kind is an error at start.
var dashboardTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
}

// dashboardPolicy is the page's Content-Security-Policy: scripts, styles
// and requests from the admin endpoint only, never framed by another page
// (a frame could trick a click on a reset), no form posted anywhere.
const dashboardPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// dashboardFile is an embedded file, ready to serve.
type dashboardFile struct {
	body        []byte
	contentType string
	etag        string
}

// dashboardFiles are the embedded files by name: the folder is flat.
var dashboardFiles = mustLoadDashboard(dashboardFS)

// mustLoadDashboard reads the files of the embedded folder.
func mustLoadDashboard(fsys fs.FS) map[string]dashboardFile {
	files, err := loadDashboard(fsys)
	if err != nil {
		panic(err) // the embedded files are fixed at build time; TestDashboardFiles checks them
	}
	return files
}

func loadDashboard(fsys fs.FS) (map[string]dashboardFile, error) {
	entries, err := fs.ReadDir(fsys, "dashboard")
	if err != nil {
		return nil, err
	}
	files := make(map[string]dashboardFile, len(entries))
	for _, e := range entries {
		ct, ok := dashboardTypes[path.Ext(e.Name())]
		if e.IsDir() || !ok {
			return nil, fmt.Errorf("dashboard: %s: only .html, .css and .js files are served", e.Name())
		}
		body, err := fs.ReadFile(fsys, "dashboard/"+e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		files[e.Name()] = dashboardFile{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return files, nil
}

// dashboardRoutes are the admin routes of the dashboard: its files, and
// the bare path, redirected to the folder.
func dashboardRoutes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: dashboardPrefix, Handler: caddy.AdminHandlerFunc(serveDashboard)},
		{Pattern: strings.TrimSuffix(dashboardPrefix, "/"), Handler: caddy.AdminHandlerFunc(redirectDashboard)},
	}
}

// serveDashboard answers GET (and HEAD) of a dashboard file; the folder
// itself is index.html.
func serveDashboard(w http.ResponseWriter, r *http.Request) error {
	if err := allowMethods(w, r, http.MethodGet, http.MethodHead); err != nil {
		return err
	}
	name := strings.TrimPrefix(r.URL.Path, dashboardPrefix)
	if name == "" {
		name = "index.html"
	}
	f, ok := dashboardFiles[name]
	if !ok {
		return apiError(http.StatusNotFound, "no such file: %s (the dashboard is %s)", r.URL.Path, dashboardPrefix)
	}
	return serveFile(w, r, name, f)
}

// serveFile answers a request of a dashboard file, on the admin endpoint
// or a site (rate_limit_ui).
func serveFile(w http.ResponseWriter, r *http.Request, name string, f dashboardFile) error {
	if err := allowMethods(w, r, http.MethodGet, http.MethodHead); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Etag", f.etag)
	h.Set("Cache-Control", "no-cache") // revalidate: a new binary may serve new files
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", dashboardPolicy)
	h.Set("X-Frame-Options", "DENY")
	// the page's own requests carry its address: Caddy's admin checks it
	// (as Origin or Referer) on every request a browser makes
	h.Set("Referrer-Policy", "same-origin")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	return nil
}

// redirectDashboard sends /rate_limit/ui to /rate_limit/ui/, with a
// relative Location, right behind a proxy that mounts the admin endpoint
// under a prefix too.
func redirectDashboard(w http.ResponseWriter, r *http.Request) error {
	if err := allowMethods(w, r, http.MethodGet, http.MethodHead); err != nil {
		return err
	}
	w.Header().Set("Location", path.Base(dashboardPrefix)+"/")
	w.WriteHeader(http.StatusMovedPermanently)
	return nil
}
