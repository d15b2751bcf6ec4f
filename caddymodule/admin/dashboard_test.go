package admin

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/caddyserver/caddy/v2"
)

// adminMux is the admin routes on a ServeMux, as Caddy's admin endpoint
// registers them, with an error answered by its status.
func adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range (adminAPI{}).Routes() {
		mux.Handle(r.Pattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			var apiErr caddy.APIError
			if err := r.Handler.ServeHTTP(w, req); errors.As(err, &apiErr) {
				w.WriteHeader(apiErr.HTTPStatus)
			} else if err != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}))
	}
	return mux
}

func TestDashboardRoutes(t *testing.T) {
	mux := adminMux()
	for i, tc := range []struct {
		method, target string
		status         int
		contentType    string
		body           string // a part of the body
		location       string
	}{
		{method: "GET", target: "/rate_limit/ui/", status: 200, contentType: "text/html; charset=utf-8", body: `<script src="app.js"`},
		{method: "GET", target: "/rate_limit/ui/index.html", status: 200, contentType: "text/html; charset=utf-8", body: "<!doctype html>"},
		{method: "GET", target: "/rate_limit/ui/app.css", status: 200, contentType: "text/css; charset=utf-8", body: ":root"},
		{method: "GET", target: "/rate_limit/ui/app.js", status: 200, contentType: "text/javascript; charset=utf-8", body: `"use strict"`},
		{method: "HEAD", target: "/rate_limit/ui/app.js", status: 200, contentType: "text/javascript; charset=utf-8"},
		{method: "GET", target: "/rate_limit/ui", status: 301, location: "ui/"},
		{method: "GET", target: "/rate_limit/ui/nope.js", status: 404},
		{method: "GET", target: "/rate_limit/ui/dashboard/app.js", status: 404},
		{method: "GET", target: "/rate_limit/ui/app.js/", status: 404},
		{method: "POST", target: "/rate_limit/ui/", status: 405},
		{method: "PUT", target: "/rate_limit/ui/app.js", status: 405},
		{method: "PATCH", target: "/rate_limit/ui/", status: 405},
		{method: "DELETE", target: "/rate_limit/ui/index.html", status: 405},
		{method: "POST", target: "/rate_limit/ui", status: 405},
		{method: "GET", target: "/rate_limit/", status: 200, contentType: "application/json"}, // the API is still there
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
		if w.Code != tc.status {
			t.Errorf("Test %d: %s %s: status %d, want %d", i, tc.method, tc.target, w.Code, tc.status)
			continue
		}
		if got := w.Header().Get("Content-Type"); tc.contentType != "" && got != tc.contentType {
			t.Errorf("Test %d: %s %s: Content-Type %q, want %q", i, tc.method, tc.target, got, tc.contentType)
		}
		if !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("Test %d: %s %s: body does not contain %q", i, tc.method, tc.target, tc.body)
		}
		if got := w.Header().Get("Location"); got != tc.location {
			t.Errorf("Test %d: %s %s: Location %q, want %q", i, tc.method, tc.target, got, tc.location)
		}
		if tc.method == "HEAD" && w.Body.Len() != 0 {
			t.Errorf("Test %d: HEAD %s: a body of %d bytes", i, tc.target, w.Body.Len())
		}
		if tc.status == 405 && w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("Test %d: %s %s: Allow %q, want GET, HEAD", i, tc.method, tc.target, w.Header().Get("Allow"))
		}
	}
}

// TestDashboardHeaders: the page may not be framed, loads nothing from
// elsewhere, sends its own address with its requests (Caddy's admin checks
// it), and is revalidated by its ETag.
func TestDashboardHeaders(t *testing.T) {
	mux := adminMux()
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/rate_limit/ui/", nil))
	h := w.Header()
	for name, want := range map[string]string{
		"Content-Security-Policy": dashboardPolicy,
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
		"Cache-Control":           "no-cache",
		"Etag":                    dashboardFiles["index.html"].etag,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(dashboardPolicy, "frame-ancestors 'none'") || !strings.Contains(dashboardPolicy, "connect-src 'self'") {
		t.Errorf("policy %q: want frame-ancestors 'none' and connect-src 'self'", dashboardPolicy)
	}
	req := httptest.NewRequest("GET", "/rate_limit/ui/", nil)
	req.Header.Set("If-None-Match", h.Get("Etag"))
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("GET with If-None-Match of the ETag: %d with %d bytes, want 304 and none", w.Code, w.Body.Len())
	}
}

// TestDashboardFiles: every embedded file is served, and none names
// another host: the page must work offline, and ask the admin endpoint
// only.
func TestDashboardFiles(t *testing.T) {
	names, err := fs.Glob(dashboardFS, "dashboard/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(dashboardFiles) || len(names) < 3 {
		t.Fatalf("embedded %v, served %d files", names, len(dashboardFiles))
	}
	for name, f := range dashboardFiles {
		text := string(f.body)
		for _, bad := range []string{"http://", "https://", "//cdn", `src="//`, `href="//`, "url(//", "@import"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q: the page must load nothing from another host", name, bad)
			}
		}
	}
	// the page's subresources are fetched in cors mode: Caddy's admin
	// refuses no-cors requests
	index := string(dashboardFiles["index.html"].body)
	for _, tag := range []string{`<link rel="stylesheet" href="app.css" crossorigin="anonymous">`, `<script src="app.js" defer crossorigin="anonymous">`} {
		if !strings.Contains(index, tag) {
			t.Errorf("index.html lacks %s", tag)
		}
	}
}

func TestLoadDashboard(t *testing.T) {
	for i, tc := range []struct {
		files fstest.MapFS
		err   string
	}{
		{fstest.MapFS{"dashboard/a.html": {Data: []byte("x")}, "dashboard/b.js": {Data: []byte("y")}}, ""},
		{fstest.MapFS{"dashboard/logo.png": {Data: []byte("x")}}, "logo.png: only .html, .css and .js files are served"},
		{fstest.MapFS{"dashboard/sub/a.js": {Data: []byte("x")}}, "sub: only .html, .css and .js files are served"},
		{fstest.MapFS{}, "open dashboard: file does not exist"},
	} {
		files, err := loadDashboard(tc.files)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Test %d: %v", i, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Test %d: error %v, want %q", i, err, tc.err)
		case tc.err == "" && (files["a.html"].contentType != "text/html; charset=utf-8" || files["b.js"].etag == files["a.html"].etag):
			t.Errorf("Test %d: files %+v", i, files)
		}
	}
}
