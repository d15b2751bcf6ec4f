package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// hostileCaddyfile keys a rule by a header a client chooses, on a server
// that takes headers of up to 1 MB (Caddy's default is 16 KB).
const hostileCaddyfile = `{
	{{.Global}}
	servers {
		max_header_size 1MB
	}
}
:{{.HTTP}} {
	rate_limit /api/* {
		name hostile
		limit 1000 1h
		by header X-Key
	}
	respond "ok"
}
`

// TestHostileKeys: keys of almost 1 MB each, one over the server's header
// limit, and keys that are not UTF-8: each is decided or refused cleanly,
// and memory stays bounded (the limiter keeps a hash of each key, the
// busiest-keys sketch its first 200 bytes).
func TestHostileKeys(t *testing.T) {
	p := startCaddy(t, hostileCaddyfile)
	wantStatuses(t, "warm-up", p.statuses(t, 1, "/api/x", "X-Key", "warm-up"), seq(1, 200, 0, 0))
	idle := p.rss(t)
	for i := range 200 {
		key := fmt.Sprintf("%d-%s", i, strings.Repeat("k", 900<<10))
		if code := p.status(t, "/api/x", "X-Key", key); code != 200 {
			t.Fatalf("a 900 KB key: %d", code)
		}
	}
	if code := p.status(t, "/api/x", "X-Key", strings.Repeat("k", 2<<20)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 2 MB key: %d, want 431 from the server", code)
	}
	if grown := p.rss(t) - idle; grown > 64<<20 {
		t.Errorf("RSS grew by %d MB after 200 keys of 900 KB, want under 64", grown>>20)
	} else {
		t.Logf("RSS +%.1f MB after 200 keys of 900 KB (180 MB of keys)", float64(grown)/(1<<20))
	}
	var top struct {
		Keys []struct {
			Key       string `json:"key"`
			Truncated bool   `json:"truncated"`
		} `json:"keys"`
	}
	p.adminJSON(t, "/rate_limit/rules/hostile/keys?top=1000", &top)
	for _, k := range top.Keys {
		if len(k.Key) > 1024 {
			t.Fatalf("the top keys hold a key of %d bytes", len(k.Key))
		}
	}

	// not UTF-8: counted, shown, reset
	bad := "\xff\xfe-key"
	wantStatuses(t, "a key that is not UTF-8", p.statuses(t, 2, "/api/x", "X-Key", bad), seq(2, 200, 0, 0))
	code, body := p.admin(t, http.MethodGet, "/rate_limit/rules/hostile/keys/%FF%FE-key", "")
	if code != 200 || !strings.Contains(body, `"used"`) {
		t.Errorf("GET the key that is not UTF-8: %d %s", code, body)
	}
	if code, body := p.admin(t, http.MethodDelete, "/rate_limit/rules/hostile/keys/%FF%FE-key", ""); code != 200 {
		t.Errorf("DELETE the key that is not UTF-8: %d %s", code, body)
	}
	for _, path := range []string{"/rate_limit/rules/hostile/keys/..%2F..%2Fconfig%2F", "/rate_limit/rules/..%2Fhostile/keys/x", "/rate_limit/rules/hostile/keys/%2e%2e"} {
		if code, body := p.admin(t, http.MethodGet, path, ""); code != http.StatusNotFound && code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 404 or 400", path, code, body)
		}
	}
}
