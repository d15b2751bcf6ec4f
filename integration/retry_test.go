package integration

import (
	"strconv"
	"testing"
	"time"
)

// TestRetryAfterHonoured checks that a client that waits as long as
// Retry-After says is served: one request per second, token bucket.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name once
		limit 1 1s
		algorithm token_bucket
	}
	respond "ok"
}
`)
	if code := p.status(t, "/"); code != 200 {
		t.Fatalf("first request: status %d, want 200", code)
	}
	code, h, _ := p.get(t, "/")
	if code != 429 {
		t.Fatalf("second request: status %d, want 429", code)
	}
	if h.Get("Retry-After") != "1" {
		t.Fatalf("second request: Retry-After %q, want 1", h.Get("Retry-After"))
	}
	secs, _ := strconv.Atoi(h.Get("Retry-After"))
	time.Sleep(time.Duration(secs) * time.Second) // the behaviour under test: waiting as told
	if code := p.status(t, "/"); code != 200 {
		t.Errorf("after waiting Retry-After: status %d, want 200", code)
	}
	if code := p.status(t, "/"); code != 429 {
		t.Errorf("right after that: status %d, want 429", code)
	}
}

// TestRetryJitter checks retry_jitter 1: Retry-After is the wait plus up
// to as much again, and varies between denials.
func TestRetryJitter(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, plainGlobals+`
:{{.HTTP}} {
	rate_limit {
		name jittery
		limit 1 100s
		algorithm token_bucket
		retry_jitter 1
	}
	respond "ok"
}
`)
	if code := p.status(t, "/"); code != 200 {
		t.Fatalf("first request: status %d, want 200", code)
	}
	seen := make(map[int]bool)
	for k := range 20 {
		code, h, _ := p.get(t, "/")
		secs, err := strconv.Atoi(h.Get("Retry-After"))
		// The wait is just under 100 s; jitter adds [0, 1)× that.
		if code != 429 || err != nil || secs < 99 || secs > 200 {
			t.Errorf("denial %d: status %d, Retry-After %q; want 429 and 99..200", k, code, h.Get("Retry-After"))
		}
		seen[secs] = true
	}
	if len(seen) < 3 {
		t.Errorf("20 denials gave Retry-After values %v: want them spread", seen)
	}
}
