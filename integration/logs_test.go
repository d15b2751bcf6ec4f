package integration

import (
	"strings"
	"testing"
)

// TestDenialLog checks the log line of a denial: at info, with the rule
// and the client IP, and the key only with log_key.
func TestDenialLog(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, trustLoopback+`
:{{.HTTP}} {
	rate_limit /secret {
		name secret_keys
		limit 1 30d
		by header X-API-Key
	}
	rate_limit /logged {
		name logged_keys
		limit 1 30d
		by header X-API-Key
		log_key
	}
	rate_limit /shadow {
		name shadow_keys
		limit 1 30d
		shadow
	}
	respond "ok"
}
`)
	for _, path := range []string{"/secret", "/logged"} {
		wantStatuses(t, path, p.statuses(t, 2, path, "X-API-Key", "key-"+path[1:], "X-Forwarded-For", "192.0.2.7"), seq(1, 200, 1, 429))
	}
	wantStatuses(t, "/shadow", p.statuses(t, 2, "/shadow", xff("192.0.2.8")...), seq(2, 200, 0, 0))

	line := p.waitLog(`"msg":"rate limit exceeded"`, `"rule":"secret_keys"`)
	if line == "" {
		t.Fatal("no log line for the denial by secret_keys")
	}
	if !strings.Contains(line, `"level":"info"`) || !strings.Contains(line, `"client_ip":"192.0.2.7"`) {
		t.Errorf("denial log %s: want level info and client_ip 192.0.2.7", line)
	}
	if strings.Contains(line, "key-secret") {
		t.Errorf("denial log %s: has the key without log_key", line)
	}
	line = p.waitLog(`"msg":"rate limit exceeded"`, `"rule":"logged_keys"`)
	if !strings.Contains(line, `"key":"key-logged"`) {
		t.Errorf("denial log %q: want \"key\":\"key-logged\" with log_key", line)
	}
	if line := p.waitLog(`"rule":"shadow_keys"`); !strings.Contains(line, "shadow") || !strings.Contains(line, `"client_ip":"192.0.2.8"`) {
		t.Errorf("shadow denial log %q: want a line saying shadow, with client_ip", line)
	}
}
