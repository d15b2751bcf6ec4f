package caddymodule

import (
	"cmp"
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
		{by: []string{"query key"}, query: "a=1&key=k%202", want: "k 2", wantOK: true},
		// a source with several values is missing: a backend may read the other
		{by: []string{"query key"}, query: "a=1&key=k%202&key=3", wantOK: false},
		{by: []string{"query key"}, query: "key=a&k%65y=a", wantOK: false},
		{by: []string{"header X-Api-Key"}, header: http.Header{"X-Api-Key": {"k1", "k2"}}, wantOK: false},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a; other=1"}}, want: "a", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a; sid=b"}}, wantOK: false},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a", "sid=b"}}, wantOK: false},
		{by: []string{"{http.request.header.X-Api-Key}"}, header: http.Header{"X-Api-Key": {"k1", "k2"}}, wantOK: false},
		{by: []string{"{http.request.header.x-api-key}"}, header: http.Header{"X-Api-Key": {"k1"}}, want: "k1", wantOK: true},
		{by: []string{"{http.request.uri.query.key}"}, query: "key=a&key=b", wantOK: false},
		{by: []string{"{http.request.cookie.sid}"}, header: http.Header{"Cookie": {"sid=a; sid=b"}}, wantOK: false},
		{by: []string{"query key"}, query: "a=1", wantOK: false},
		// a key is what the backend reads: a cookie percent-decoded once, +, %2B, %20 one space
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=%61%62c"}}, want: "abc", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=%2561bc"}}, want: "%61bc", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {`sid="a%62c"`}}, want: "abc", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a+b"}}, want: "a b", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a%2Bb"}}, want: "a b", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a%20b"}}, want: "a b", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=a%zz%61"}}, want: "a%zz%61", wantOK: true},
		{by: []string{"cookie sid"}, header: http.Header{"Cookie": {"sid=%00"}}, want: "\x00", wantOK: false}, // decoded to a control character: missing
		{by: []string{"{http.request.cookie.sid}"}, header: http.Header{"Cookie": {"sid=%61bc"}}, want: "abc", wantOK: true},
		{by: []string{"{http.request.cookie.sid}@{http.request.method}"}, header: http.Header{"Cookie": {"sid=%61bc"}}, want: "abc@", wantOK: true},
		{by: []string{"{http.request.cookie.sid}@{http.request.method}"}, header: http.Header{"Cookie": {"sid=a; sid=b"}}, want: "@", wantOK: true},
		{by: []string{"{http.request.header.X-Tenant}/{http.request.uri.query.k}/{unknown}"}, header: http.Header{"X-Tenant": {"t1", "t2"}}, query: "k=a%2Bb", want: "/a+b/{unknown}", wantOK: true},
		// a header is what the backend reads too: as sent, never decoded
		{by: []string{"header X-Api-Key"}, header: http.Header{"X-Api-Key": {"%61bc+d"}}, want: "%61bc+d", wantOK: true},
		{by: []string{"query key"}, query: "key=a+b%2Bc%zz", want: "a+b%2Bc%zz", wantOK: true},
		{by: []string{"query key"}, query: "key=a+b%2Bc", want: "a b+c", wantOK: true},
		{by: []string{"header X-Api-Key", "ip"}, ip: "192.0.2.7", header: http.Header{"X-Api-Key": {"k1"}}, want: "k1" + keySeparator + "192.0.2.7", wantOK: true},
		{by: []string{"header X-Api-Key", "ip"}, ip: "192.0.2.7", wantOK: false},
		{by: []string{"static everyone"}, want: "everyone", wantOK: true},
		{by: []string{"{http.request.header.X-Tenant}"}, header: http.Header{"X-Tenant": {"acme"}}, want: "acme", wantOK: true},
		{by: []string{"{http.request.header.X-Tenant}-{http.request.method}"}, header: http.Header{"X-Tenant": {"acme"}}, want: "acme-", wantOK: true},
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
			switch key {
			case "http.request.header.X-Tenant":
				return r.Header.Get("X-Tenant"), true
			case "http.request.method":
				return "", true
			}
			return nil, false
		})
		got, ok := keyOf(srcs, &request{r: r, repl: repl})
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Test %d: by %q: got %q, %v; want %q, %v", i, tc.by, got, ok, tc.want, tc.wantOK)
		}
	}
}

// TestKeyPrefixes: ipv4_prefix and ipv6_prefix shorten any key part that
// is an IP address, whatever its source, and leave other values whole.
func TestKeyPrefixes(t *testing.T) {
	for i, tc := range []struct {
		by     []string
		v4, v6 int
		ip     string
		header string
		want   string
	}{
		{by: []string{"{http.request.header.X-IP}"}, v4: 24, header: "192.0.2.7", want: "192.0.2.0/24"},
		{by: []string{"{http.request.header.X-IP}"}, v4: 24, header: "2001:db8:1:2::9", want: "2001:db8:1:2::9/128"},
		{by: []string{"{http.request.header.X-IP}"}, v4: 24, v6: 48, header: "2001:db8:1:2::9", want: "2001:db8:1::/48"},
		{by: []string{"{http.request.header.X-IP}"}, v4: 24, header: "not-an-ip", want: "not-an-ip"},
		{by: []string{"header X-IP"}, v4: 16, header: "::ffff:192.0.2.7", want: "192.0.0.0/16"},
		{by: []string{"ip"}, v4: 8, ip: "192.0.2.7", want: "192.0.0.0/8"},
		{by: []string{"header X-IP", "ip"}, v4: 24, ip: "198.51.100.9", header: "user-1", want: "user-1" + keySeparator + "198.51.100.0/24"},
		// by ip/N keeps its own prefix
		{by: []string{"ip/16"}, v4: 24, ip: "192.0.2.7", want: "192.0.0.0/16"},
		{by: []string{"{http.request.header.X-IP}"}, header: "192.0.2.7", want: "192.0.2.7"},
	} {
		srcs, err := parseKeySources(tc.by)
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		withPrefixes(srcs, tc.v4, tc.v6)
		r := newRequest(cmp.Or(tc.ip, "203.0.113.1"))
		r.Header.Set("X-IP", tc.header)
		repl := caddy.NewReplacer()
		repl.Map(func(key string) (any, bool) {
			if key == "http.request.header.X-IP" {
				return r.Header.Get("X-IP"), true
			}
			return nil, false
		})
		if got, ok := keyOf(srcs, &request{r: r, repl: repl}); got != tc.want || !ok {
			t.Errorf("Test %d: by %q prefixes %d/%d: got %q, %v; want %q", i, tc.by, tc.v4, tc.v6, got, ok, tc.want)
		}
	}
}
