package integration

import (
	"strings"
	"testing"
	"time"
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
	if line := p.waitLog(`"msg":"rate limit exceeded (shadow`, `"rule":"shadow_keys"`); !strings.Contains(line, "shadow") || !strings.Contains(line, `"client_ip":"192.0.2.8"`) {
		t.Errorf("shadow denial log %q: want a line saying shadow, with client_ip", line)
	}
}

// TestDenialLogSampled: a flood of denials writes at most denialsFirst
// (20) lines a second, then one in 1000; every denial is still counted.
func TestDenialLogSampled(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name flood
		limit 1 30d
	}
	respond "ok"
}
`)
	begin := time.Now()
	tally := count(t, 301, func() int { return p.status(t, "/") })
	if tally[200] != 1 || tally[429] != 300 {
		t.Fatalf("statuses %v, want 1 200 and 300 429s", tally)
	}
	// the sampler counts by wall-clock second: the flood may span several
	// on a busy machine, each with its 20 lines and a 1000th
	seconds := int(time.Now().Unix()-begin.Unix()) + 1
	// The log reaches the test through a pipe: wait for the 20 lines that
	// must come, then see that no more did.
	p.waitLog(`"msg":"rate limit exceeded"`, `"ts"`) // the first
	lines := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if lines = strings.Count(p.log(), `"msg":"rate limit exceeded"`); lines >= 20 {
			break
		}
	}
	if lines < 20 || lines > 21*seconds {
		t.Errorf("%d denial log lines for 300 denials over %d wall-clock seconds, want 20 to %d (sampled)", lines, seconds, 21*seconds)
	}
}

// TestDenialEvent: a denial emits the rate_limit_exceeded Caddy event
// (seen here in the events app's debug log), with the rule and client.
func TestDenialEvent(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, `{
	{{.Global}}
	debug
}
:{{.HTTP}} {
	rate_limit {
		name evented
		limit 1 30d
	}
	respond "ok"
}
`)
	wantStatuses(t, "evented", p.statuses(t, 2, "/"), seq(1, 200, 1, 429))
	line := p.waitLog(`"name":"rate_limit_exceeded"`)
	if !strings.Contains(line, `"rule":"evented"`) || !strings.Contains(line, `"client_ip":"127.0.0.1"`) || !strings.Contains(line, `"origin":"http.handlers.rate_limit"`) {
		t.Errorf("event log line %q: want the rule, the client IP and the origin", line)
	}
}
