package integration

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// A request of a count_status rule reserves its unit before it runs and
// settles after: a response that count_status does not count gives the
// unit back. Issue 36: a slow response gave it back into the window (or
// sliding log) in force when it ended, not the one it was taken from, and
// the next failed logins passed. These tests run a real Caddy in front of
// an upstream that holds /login/slow until told, and answers /login/fail
// 401 at once.

const giveBackCaddyfile = `{
	{{.Global}}
	GLOBAL
}
:{{.HTTP}} {
	rate_limit /login/* {
		name login
		limit 3 WINDOW
		algorithm ALGORITHM
		count_status 401 403
		RULE
	}
	reverse_proxy BACKEND
}
`

// giveBackRedis are the lines that put the login rule in Redis: the
// global option's store, and the rule's (fail_closed: a slow answer shows
// as a 503, not as a decision taken locally).
var giveBackRedis = [2]string{`rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			timeout 2s
		}
	}`, `store redis
		on_store_error fail_closed`}

// loginBackend answers /login/fail 401 at once and holds /login/slow
// until releaseAll, then answers 200.
type loginBackend struct {
	srv     *httptest.Server
	entered chan struct{}
	mu      sync.Mutex
	release chan struct{} // closed by releaseAll, then replaced
}

func newLoginBackend(t *testing.T) *loginBackend {
	b := &loginBackend{entered: make(chan struct{}, 64), release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			b.mu.Lock()
			release := b.release
			b.mu.Unlock()
			b.entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return // 200
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// releaseAll answers the slow requests held.
func (b *loginBackend) releaseAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.release)
	b.release = make(chan struct{})
}

// startGiveBack starts Caddy with a login rule of limit 3 per window on
// algo, in front of b; in the Redis at redisAddr, if not "".
func startGiveBack(t *testing.T, b *loginBackend, algo string, window time.Duration, redisAddr string) *caddyProc {
	var store [2]string
	var env []string
	if redisAddr != "" {
		store, env = giveBackRedis, []string{"EDGELIMIT_REDIS=" + redisAddr}
	}
	r := strings.NewReplacer("WINDOW", window.String(), "ALGORITHM", algo, "BACKEND", strings.TrimPrefix(b.srv.URL, "http://"),
		"GLOBAL", store[0], "RULE", store[1])
	return startCaddy(t, r.Replace(giveBackCaddyfile), env...)
}

// slowRequests sends n requests to /login/slow and returns once the
// upstream holds them all (each has its reservation), with a wait for
// their statuses.
func slowRequests(t *testing.T, p *caddyProc, b *loginBackend, n int) func() []int {
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = p.status(t, "/login/slow")
		}()
	}
	for range n {
		select {
		case <-b.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow requests did not reach the upstream")
		}
	}
	return func() []int { wg.Wait(); return codes }
}

// TestGiveBackStaysInItsWindow: fixed_window, limit 3 per 4s. Three slow
// requests reserve window k's 3 units a second before its end; just after
// the edge, three failed logins take window k+1's; then the slow
// requests end with 200s, which count_status does not count, and give
// their units back: to window k, which has ended. Three more failed
// logins in window k+1 are refused: 3×401 and 3×429 in it (on main, the
// give-back went to window k+1 and all six were 401: 6 failed logins in
// one window of limit 3). In process, and with store redis, whose script
// had the same flaw.
func TestGiveBackStaysInItsWindow(t *testing.T) {
	t.Parallel()
	t.Run("in_process", func(t *testing.T) {
		t.Parallel()
		b := newLoginBackend(t)
		giveBackAtEdge(t, b, startGiveBack(t, b, "fixed_window", 4*time.Second, ""), 4*time.Second)
	})
	t.Run("store_redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		b := newLoginBackend(t)
		giveBackAtEdge(t, b, startGiveBack(t, b, "fixed_window", 4*time.Second, srv.Addr), 4*time.Second)
	})
}

// giveBackAtEdge plays TestGiveBackStaysInItsWindow's sequence on p, a
// fixed window of 3 per window in front of b.
func giveBackAtEdge(t *testing.T, b *loginBackend, p *caddyProc, window time.Duration) {
	for attempt := 0; ; attempt++ {
		// a second before an edge of the epoch-aligned windows, with
		// time for the slow requests to reserve before it
		edge := time.Now().Truncate(window).Add(window)
		if time.Until(edge) < 1500*time.Millisecond {
			edge = edge.Add(window)
		}
		time.Sleep(time.Until(edge.Add(-time.Second)))
		wait := slowRequests(t, p, b, 3)
		if time.Now().After(edge.Add(-200*time.Millisecond)) && attempt < 3 {
			// too slow to be sure they reserved in window k: let them end
			// as counted-not and try the next window
			b.releaseAll()
			wait()
			continue
		}
		time.Sleep(time.Until(edge.Add(50 * time.Millisecond)))
		first := p.statuses(t, 3, "/login/fail")
		b.releaseAll()
		if got := wait(); got[0] != 200 || got[1] != 200 || got[2] != 200 {
			t.Fatalf("slow requests: %v, want 3×200", got)
		}
		second := p.statuses(t, 3, "/login/fail")
		if time.Now().After(edge.Add(window)) {
			t.Fatalf("the failed logins took more than the window (%v): rerun", window)
		}
		wantStatuses(t, "failed logins just after the edge", first, seq(3, 401, 0, 0))
		wantStatuses(t, "failed logins after the slow requests gave their units back", second, seq(0, 0, 3, 429))
		return
	}
}

// TestGiveBackOwnEvent: sliding_log, limit 3 per 3s. A slow request
// reserves a unit at t0; 300 ms later two failed logins fill the log;
// the slow request ends with a 200 and gives its unit back: its own
// event goes, so a third failed login passes, and the log holds the
// three failures. Once t0 has left the window (t0+3s), a fourth failed
// login is refused until the first failures leave it: 3×401 and 1×429
// within 3 s (on main, the give-back removed the newest event, a failed
// login's, and the reservation's event, left in the log, freed a unit at
// t0+3s: 4 failed logins within 3 s of limit 3).
func TestGiveBackOwnEvent(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	b := newLoginBackend(t)
	p := startGiveBack(t, b, "sliding_log", window, "")
	t0 := time.Now()
	wait := slowRequests(t, p, b, 1)
	time.Sleep(time.Until(t0.Add(300 * time.Millisecond)))
	t1 := time.Now()
	first := p.statuses(t, 2, "/login/fail")
	b.releaseAll()
	if got := wait(); got[0] != 200 {
		t.Fatalf("slow request: %d, want 200", got[0])
	}
	third := p.status(t, "/login/fail")
	time.Sleep(time.Until(t0.Add(window + 100*time.Millisecond)))
	fourth := p.status(t, "/login/fail")
	if time.Since(t1) >= window {
		t.Fatalf("the failed logins took more than the window (%v): rerun", window)
	}
	wantStatuses(t, "failed logins", append(append(first, third), fourth), []int{401, 401, 401, 429})
}
