package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func TestPathSegments(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "[]",
		"/":                             "[]",
		"cluster":                       "[cluster]",
		"rules/api/keys/":               "[rules api keys]",
		"rules/a%20b/keys/10.0.0.0%2F8": "[rules a b keys 10.0.0.0/8]",
		"rules/x/keys/%00%1F":           "[rules x keys \x00\x1f]",
	} {
		got, err := pathSegments(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("pathSegments(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := pathSegments("rules/%zz"); err == nil {
		t.Error("a bad escape should be an error")
	}
}

// adminStatus is the status serveAdmin gives a request.
func adminStatus(t *testing.T, method, target string) int {
	t.Helper()
	w := httptest.NewRecorder()
	err := serveAdmin(w, httptest.NewRequest(method, target, nil))
	var apiErr caddy.APIError
	switch {
	case err == nil:
		return w.Code
	case errors.As(err, &apiErr):
		return apiErr.HTTPStatus
	}
	t.Fatalf("%s %s: %v", method, target, err)
	return 0
}

func TestAdminRoutes(t *testing.T) {
	const name = "admin routes test"
	lim := runningRule(t, name, hourlyLimit(5))
	lim.AllowAt("k/1", time.Now(), 1)
	for _, c := range []struct {
		method, target string
		want           int
	}{
		{http.MethodGet, "/rate_limit/", 200},
		{http.MethodGet, "/rate_limit/cluster", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys?top=3", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 200},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k%2F2", 404},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/other/k", 404},
		{http.MethodGet, "/rate_limit/rules/admin%20routes%20test/keys/k/1", 404},
		{http.MethodGet, "/rate_limit/rules/nope", 404},
		{http.MethodGet, "/rate_limit/rules", 404},
		{http.MethodPost, "/rate_limit/cluster", 405},
		{http.MethodDelete, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 200},
		{http.MethodDelete, "/rate_limit/rules/admin%20routes%20test/keys/k%2F1", 404},
	} {
		if got := adminStatus(t, c.method, c.target); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, got, c.want)
		}
	}
}
