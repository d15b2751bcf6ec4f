package integration

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// redisFallbackConfig: max_concurrent 3 (/c/) and block_for (/b/, 2 an
// hour, then an hour's block), both in Redis, both falling back on the
// in-process limiter (on_store_error local) when Redis is away.
const redisFallbackConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			timeout 100ms
			probe_interval 200ms
		}
	}
}
http://127.0.0.1:{{.HTTP}} {
	rate_limit /c/* {
		name conc
		max_concurrent 3
		by header X-User
		store redis
		on_store_error local
	}
	rate_limit /b/* {
		name blk
		limit 2 1h
		block_for 1h
		by header X-User
		store redis
		on_store_error local
	}
	handle /b/* {
		respond "ok"
	}
	reverse_proxy BACKEND
}
`

// TestRedisFallbackKeepsLeasesAndBlocks: with Redis stopped mid-test,
// the on_store_error local fallback counts the requests that hold leases
// (2 held, 3 more: 1 admitted, not 3: 5 in flight of 3 before), a block
// it starts holds once Redis answers again (Redis, restarted empty,
// would admit the key), and the requests it admitted, which hold no
// lease, count against N after Redis is back until they end (3 held, a
// fourth refused, not leased); caddy_rate_limit_store_unleased_in_flight
// and caddy_rate_limit_blocks_total count them.
func TestRedisFallbackKeepsLeasesAndBlocks(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	b := newSlowBackend(t)
	p := startCaddy(t, strings.ReplaceAll(redisFallbackConfig, "BACKEND", b.addr()), "EDGELIMIT_REDIS="+srv.Addr)
	codes := make(chan int, 16)
	slow := func(user string) {
		go func() {
			code, _, err := p.rawGet(context.Background(), "/c/slow", "X-User", user)
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	wantCodes := func(what string, n, want int) {
		t.Helper()
		for range n {
			select {
			case c := <-codes:
				if c != want {
					t.Fatalf("%s: %d, want %d", what, c, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no answer in 10 s", what)
			}
		}
	}
	held := func(what string, want int64) {
		t.Helper()
		if n := b.inSlow.Load(); n != want {
			t.Fatalf("%s: the upstream holds %d, want %d", what, n, want)
		}
	}
	release := b.reopen

	// Redis up: two of erin's requests hold leases.
	for range 2 {
		slow("erin")
		<-b.entered
	}
	srv.Kill()

	// Redis down: the fallback counts the two leased requests.
	for range 3 {
		slow("erin")
	}
	<-b.entered
	wantCodes("Redis down, 2 leased in flight", 2, http.StatusTooManyRequests)
	held("Redis down, 2 leased in flight and 3 more asked", 3)
	release()
	wantCodes("released", 3, http.StatusOK)

	// A block the fallback starts.
	for i, want := range []int{200, 200, 429, 429} {
		if code := p.status(t, "/b/x", "X-User", "mallory"); code != want {
			t.Fatalf("Redis down, mallory's request %d: %d, want %d", i+1, code, want)
		}
	}

	// Three of erin's requests the fallback admits, holding no lease.
	for range 3 {
		slow("erin")
		<-b.entered
	}
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if got := metricValue(t, metrics, `caddy_rate_limit_store_unleased_in_flight{rule="conc"}`); got != "3" {
		t.Errorf("store_unleased_in_flight with 3 admitted by the fallback: %q, want 3", got)
	}

	// Redis back, empty: wait for each rule to decide on it again.
	srv.Restart()
	for i := 0; ; i++ {
		p.status(t, "/c/fast", "X-User", fmt.Sprint("probe-", i))
		p.status(t, "/b/x", "X-User", fmt.Sprint("probe-", i))
		log := p.log()
		if strings.Contains(log, `"msg":"rate limit store: redis answers again; decisions come from it","rule":"conc"`) &&
			strings.Contains(log, `"msg":"rate limit store: redis answers again; decisions come from it","rule":"blk"`) {
			break
		}
		if i == 200 {
			t.Fatal("Redis restarted, and no rule decides on it again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// erin's three requests still count: a fourth is refused.
	slow("erin")
	wantCodes("Redis back, 3 admitted by the fallback in flight", 1, http.StatusTooManyRequests)
	held("Redis back", 3)
	// mallory's block holds, though Redis knows nothing of it.
	code, h, _ := p.get(t, "/b/x", "X-User", "mallory")
	if wait, _ := strconv.Atoi(h.Get("Retry-After")); code != http.StatusTooManyRequests || wait < 3500 || wait > 3600 {
		t.Errorf("Redis back, mallory blocked by the fallback: %d, Retry-After %q, want 429 and about 3600", code, h.Get("Retry-After"))
	}
	release()
	wantCodes("released", 3, http.StatusOK)
	_, metrics = p.admin(t, http.MethodGet, "/metrics", "")
	for sample, want := range map[string]string{
		`caddy_rate_limit_store_unleased_in_flight{rule="conc"}`: "0",
		`caddy_rate_limit_blocks_total{rule="blk"}`:              "1",
	} {
		if got := metricValue(t, metrics, sample); got != want {
			t.Errorf("%s = %q, want %s", sample, got, want)
		}
	}
	// and once they ended, Redis's N is whole again
	for range 3 {
		slow("erin")
		<-b.entered
	}
	slow("erin")
	wantCodes("Redis back, 3 leased", 1, http.StatusTooManyRequests)
	release()
	wantCodes("released", 3, http.StatusOK)
}
