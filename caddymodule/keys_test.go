package caddymodule

import (
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestKeyOf(t *testing.T) {
	for i, tc := range []struct {
		by     []string
		ip     string
		header http.Header
		query  string
		want   string
		wantOK bool
	}{
		{by: nil, ip: "192.0.2.7", want: "192.0.2.7", wantOK: true},
		{by: []string{"ip/24"}, ip: "192.0.2.7", want: "192.0.2.0/24", wantOK: true},
		{by: []string{"ip/24"}, ip: "2001:db8:1:2:3:4:5:6", want: "2001:db8:1:2::/64", wantOK: true},
		{by: []string{"ip/24/48"}, ip: "2001:db8:1:2:3:4:5:6", want: "2001:db8:1::/48", wantOK: true},
		{by: []string{"ip/16"}, ip: "::ffff:192.0.2.7", want: "192.0.0.0/16", wantOK: true},
		{by: []string{"header X-Api-Key"}, header: http.Header{"X-Api-Key": {"k1"}}, want: "k1", wantOK: true},
		{by: []string{"header X-Api-Key"}, want: "", wantOK: false},
		{by: []string{"query key"}, query: "a=1&key=k%202&key=3", want: "k 2", wantOK: true},
		{by: []string{"query key"}, query: "a=1", wantOK: false},
		{by: []string{"header X-Api-Key", "ip"}, ip: "192.0.2.7", header: http.Header{"X-Api-Key": {"k1"}}, want: "k1" + keySeparator + "192.0.2.7", wantOK: true},
		{by: []string{"header X-Api-Key", "ip"}, ip: "192.0.2.7", wantOK: false},
		{by: []string{"static everyone"}, want: "everyone", wantOK: true},
		{by: []string{"{http.request.header.X-Tenant}"}, header: http.Header{"X-Tenant": {"acme"}}, want: "acme", wantOK: true},
	} {
		srcs, err := parseKeySources(tc.by)
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		if tc.ip == "" {
			tc.ip = "198.51.100.1"
		}
		r := newRequest(tc.ip)
		r.URL.RawQuery = tc.query
		for k, v := range tc.header {
			r.Header[k] = v
		}
		repl := caddy.NewReplacer()
		repl.Map(func(key string) (any, bool) {
			if key == "http.request.header.X-Tenant" {
				return r.Header.Get("X-Tenant"), true
			}
			return nil, false
		})
		got, ok := keyOf(srcs, r, repl)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Test %d: by %q: got %q, %v; want %q, %v", i, tc.by, got, ok, tc.want, tc.wantOK)
		}
	}
}
