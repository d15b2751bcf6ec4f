package integration

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
)

// slowBackend is an upstream that holds requests whose path has "slow"
// until release is closed (or the request is cancelled), drops the
// connection of those with "error" (reverse_proxy answers 502), answers
// an Upgrade: websocket as a WebSocket that echoes until the client
// closes it, and others at once.
type slowBackend struct {
	srv     *httptest.Server
	entered chan struct{} // a /slow request arrived
	mu      sync.Mutex
	release chan struct{} // closed to let the held requests end; replaced by reopen
	inSlow  atomic.Int64
}

// held is the channel whose close lets the requests held now end.
func (b *slowBackend) held() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.release
}

// reopen lets the requests held end, and holds the next ones again.
func (b *slowBackend) reopen() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.release)
	b.release = make(chan struct{})
}

func newSlowBackend(t *testing.T) *slowBackend {
	b := &slowBackend{entered: make(chan struct{}, 4096), release: make(chan struct{})}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "slow"):
			b.inSlow.Add(1)
			defer b.inSlow.Add(-1)
			release := b.held()
			b.entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "done")
		case strings.Contains(r.URL.Path, "error"):
			hj, _ := w.(http.Hijacker)
			c, _, err := hj.Hijack()
			if err == nil {
				c.Close() // reverse_proxy answers 502
			}
		case r.Header.Get("Upgrade") == "websocket":
			hj, _ := w.(http.Hijacker)
			c, rw, err := hj.Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			rw.Flush()
			buf := make([]byte, 512)
			for { // echo until the client closes
				n, err := rw.Read(buf)
				if err != nil {
					return
				}
				c.Write(buf[:n])
			}
		default:
			fmt.Fprint(w, "fast")
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *slowBackend) addr() string { return strings.TrimPrefix(b.srv.URL, "http://") }

// releaseAll lets the held requests end, wants each of the n whose
// statuses come on codes answered 200, and waits for rule conc's gauge
// to show none in flight.
func (b *slowBackend) releaseAll(t *testing.T, p *caddyProc, codes <-chan int, n int) {
	t.Helper()
	close(b.release)
	for range n {
		if c := <-codes; c != 200 {
			t.Errorf("held request: %d, want 200", c)
		}
	}
	waitInFlight(t, p, "conc", "0")
}

const concurrencyCaddyfile = `{
	{{.Global}}
}
http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name conc
		max_concurrent 3
		by header X-User
		on_missing_key ip
	}
	reverse_proxy BACKEND
}
`

// inFlightGauge is the rule's caddy_rate_limit_in_flight sample.
func inFlightGauge(t *testing.T, p *caddyProc, rule string) string {
	t.Helper()
	_, body := p.admin(t, http.MethodGet, "/metrics", "")
	return metricValue(t, body, fmt.Sprintf(`caddy_rate_limit_in_flight{rule=%q}`, rule))
}

// waitInFlight polls the gauge until it shows want, or fails t after 10s.
func waitInFlight(t *testing.T, p *caddyProc, rule, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := inFlightGauge(t, p, rule)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("in_flight{rule=%q} = %s, want %s", rule, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConcurrencyExact(t *testing.T) {
	t.Parallel()
	b := newSlowBackend(t)
	p := startCaddy(t, strings.ReplaceAll(concurrencyCaddyfile, "BACKEND", b.addr()))
	codes := make(chan int, 8)
	for range 8 {
		go func() {
			code, _, err := p.rawGet(context.Background(), "/slow", "X-User", "alice")
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	for range 3 {
		<-b.entered
	}
	for range 5 { // the refused answer at once, while 3 are held
		if c := <-codes; c != 429 {
			t.Fatalf("refused request: %d, want 429", c)
		}
	}
	if n := b.inSlow.Load(); n != 3 {
		t.Fatalf("upstream holds %d, want 3", n)
	}
	code, h, _ := p.get(t, "/slow-refused", "X-User", "alice")
	if code != 429 || h.Get("Retry-After") != "1" || h.Get("RateLimit") != `"conc";r=0` ||
		h.Get("RateLimit-Policy") != `"conc";q=3;qu="concurrent-requests"` {
		t.Errorf("refusal: %d %v", code, h)
	}
	// another key is unaffected
	code, h, _ = p.get(t, "/fast", "X-User", "bob")
	if code != 200 || h.Get("RateLimit") != `"conc";r=2` {
		t.Errorf("other key: %d RateLimit %q", code, h.Get("RateLimit"))
	}
	if got := inFlightGauge(t, p, "conc"); got != "3" {
		t.Errorf("gauge %s, want 3", got)
	}
	var kv struct {
		InFlight *int64 `json:"in_flight"`
		Allowed  bool   `json:"allowed"`
	}
	p.adminJSON(t, "/rate_limit/rules/conc/keys/alice", &kv)
	if kv.InFlight == nil || *kv.InFlight != 3 || kv.Allowed {
		t.Errorf("key view: %+v", kv)
	}
	b.releaseAll(t, p, codes, 3)
}

// TestConcurrencyTableFull: max_keys bounds the rule's keys in flight,
// exactly: with 3 keys held on max_keys 3, each of 100 new keys is
// refused with 503 (before: the bound was split among 64 shards of at
// least one key each, so most new keys passed, by their hash), a held
// key is still refused at its own N with 429, and a release makes room.
func TestConcurrencyTableFull(t *testing.T) {
	t.Parallel()
	b := newSlowBackend(t)
	p := startCaddy(t, strings.ReplaceAll(strings.Replace(concurrencyCaddyfile, "max_concurrent 3", "max_concurrent 1\n\t\tmax_keys 3", 1), "BACKEND", b.addr()))
	codes := make(chan int, 3)
	for i := range 3 {
		go func() {
			code, _, err := p.rawGet(context.Background(), "/slow", "X-User", fmt.Sprint("held", i))
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	for range 3 {
		<-b.entered
	}
	got := map[int]int{}
	for i := range 100 {
		got[p.status(t, "/fast", "X-User", fmt.Sprint("new", i))]++
	}
	if got[503] != 100 {
		t.Errorf("100 new keys with the table full: %v, want 100 × 503", got)
	}
	if code := p.status(t, "/fast", "X-User", "held0"); code != 429 {
		t.Errorf("a held key: %d, want 429", code)
	}
	_, metrics := p.admin(t, http.MethodGet, "/metrics", "")
	if v := metricValue(t, metrics, `caddy_rate_limit_concurrent_refused_total{reason="table_full",rule="conc"}`); v != "100" {
		t.Errorf("refused_total{table_full} = %s, want 100", v)
	}
	b.releaseAll(t, p, codes, 3)
	if code := p.status(t, "/fast", "X-User", "new0"); code != 200 {
		t.Errorf("a new key after the releases: %d, want 200", code)
	}
}

// TestConcurrencyClientGone: a client that leaves mid-request frees its
// place; a WebSocket holds its place until it closes.
func TestConcurrencyClientGone(t *testing.T) {
	t.Parallel()
	b := newSlowBackend(t)
	p := startCaddy(t, strings.ReplaceAll(strings.ReplaceAll(concurrencyCaddyfile, "BACKEND", b.addr()), "max_concurrent 3", "max_concurrent 1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := p.rawGet(ctx, "/slow", "X-User", "carol")
		done <- err
	}()
	<-b.entered
	if c := p.status(t, "/fast", "X-User", "carol"); c != 429 {
		t.Fatalf("while held: %d, want 429", c)
	}
	cancel()
	<-done
	waitInFlight(t, p, "conc", "0")
	if c := p.status(t, "/fast", "X-User", "carol"); c != 200 {
		t.Fatalf("after the client left: %d, want 200", c)
	}

	// WebSocket
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.data.HTTP))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nX-User: dave\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	fmt.Fprint(conn, "ping")
	echo := make([]byte, 4)
	if _, err := br.Read(echo); err != nil || string(echo) != "ping" {
		t.Fatalf("echo %q %v", echo, err)
	}
	if c := p.status(t, "/fast", "X-User", "dave"); c != 429 {
		t.Fatalf("while the WebSocket is open: %d, want 429", c)
	}
	if got := inFlightGauge(t, p, "conc"); got != "1" {
		t.Errorf("gauge with the WebSocket open: %s, want 1", got)
	}
	conn.Close()
	waitInFlight(t, p, "conc", "0")
	if c := p.status(t, "/fast", "X-User", "dave"); c != 200 {
		t.Fatalf("after the WebSocket closed: %d, want 200", c)
	}
}

// TestConcurrencySoak: 2,000 requests of 20 keys from 32 clients, with
// random aborts and upstream errors, and a reload halfway, end with no
// request in flight (the gauge reads 0: no place leaked).
func TestConcurrencySoak(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inKey := map[string]int{}
	over := atomic.Int64{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("X-User")
		mu.Lock()
		inKey[k]++
		if inKey[k] > 3 {
			over.Add(1)
		}
		mu.Unlock()
		defer func() { mu.Lock(); inKey[k]--; mu.Unlock() }()
		if strings.HasPrefix(r.URL.Path, "/error") {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		select {
		case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond): // load shape
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(backend.Close)
	cfg := strings.ReplaceAll(concurrencyCaddyfile, "BACKEND", strings.TrimPrefix(backend.URL, "http://"))
	p := startCaddy(t, cfg)
	var sent atomic.Int64
	tally := make([]atomic.Int64, 600)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= 2000 {
				path := "/slow"
				if rand.IntN(10) == 0 {
					path = "/error"
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rand.IntN(8) == 0 {
					time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
				}
				code, _, err := p.rawGet(ctx, path, "X-User", fmt.Sprint("u", rand.IntN(20)))
				cancel()
				if err != nil {
					code = 599 // aborted by the client
				}
				tally[min(code, 599)].Add(1)
			}
		}()
	}
	for sent.Load() < 1000 {
		time.Sleep(5 * time.Millisecond)
	}
	p.reload(t, strings.ReplaceAll(cfg, "on_missing_key ip", "on_missing_key ip\n\t\texempt 192.0.2.1"))
	wg.Wait()
	waitInFlight(t, p, "conc", "0")
	// The upstream may see a 4th request of a key while an aborted one
	// is still ending there: Caddy frees the place when the client goes,
	// and the upstream notices the cancellation a little later. So the
	// upstream's count is logged; exactness is TestConcurrencyExact's.
	t.Logf("the upstream saw a 4th request of a key %d times (aborts ending)", over.Load())
	t.Logf("200: %d, 429: %d, 502: %d, aborted: %d", tally[200].Load(), tally[429].Load(), tally[502].Load(), tally[599].Load())
	if tally[200].Load() == 0 || tally[429].Load() == 0 {
		t.Errorf("want some served and some refused")
	}
}

func TestExampleConcurrency(t *testing.T) {
	t.Parallel()
	b := newSlowBackend(t)
	p := startExample(t, "concurrency.Caddyfile", "BACKEND="+b.addr())
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			code, _, _ := p.rawGet(context.Background(), "/downloads/slow")
			codes <- code
		}()
	}
	<-b.entered
	<-b.entered
	if c := <-codes; c != 429 {
		t.Fatalf("third download: %d, want 429", c)
	}
	code, h, _ := p.get(t, "/ws/fast", "X-User", "u1")
	if got := strings.Join(h.Values("RateLimit-Policy"), ", "); code != 200 || got != `"websockets";q=60;w=60, "websockets-concurrent";q=3;qu="concurrent-requests"` {
		t.Errorf("websockets: %d %q", code, h.Values("RateLimit-Policy"))
	}
	if code := p.status(t, "/ws/fast"); code != 403 {
		t.Errorf("websocket without a user: %d, want 403", code)
	}
	close(b.release)
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("download: %d", c)
		}
	}
}

// concurrencyRedisConfig: max_concurrent 3 held in Redis for every node.
const concurrencyRedisConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
			timeout 2s
		}
	}
}
http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name conc
		max_concurrent 3
		by header X-User
		store redis
		on_store_error fail_closed
	}
	reverse_proxy BACKEND
}
`

// TestConcurrencyRedis: two Caddy processes on one Redis, 8 requests of
// a key at once over both: exactly 3 reach the upstream, 5 are refused;
// when they end, their leases are gone and 3 more pass.
func TestConcurrencyRedis(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	srv := redistest.Start(t)
	b := newSlowBackend(t)
	cfg := strings.ReplaceAll(concurrencyRedisConfig, "BACKEND", b.addr())
	nodes := []*caddyProc{startCaddy(t, cfg, "EDGELIMIT_REDIS="+srv.Addr), startCaddy(t, cfg, "EDGELIMIT_REDIS="+srv.Addr)}
	for round := range 2 {
		codes := make(chan int, 8)
		for i := range 8 {
			go func() {
				code, _, err := nodes[i%2].rawGet(context.Background(), "/slow", "X-User", "erin")
				if err != nil {
					t.Error(err)
				}
				codes <- code
			}()
		}
		for range 3 {
			<-b.entered
		}
		for range 5 {
			if c := <-codes; c != 429 {
				t.Fatalf("round %d: refused request: %d, want 429", round, c)
			}
		}
		if n := b.inSlow.Load(); n != 3 {
			t.Fatalf("round %d: upstream holds %d, want 3", round, n)
		}
		var kv struct {
			InFlight *int64 `json:"in_flight"`
		}
		nodes[1].adminJSON(t, "/rate_limit/rules/conc/keys/erin", &kv)
		if kv.InFlight == nil || *kv.InFlight != 3 {
			t.Errorf("round %d: key view in_flight %v, want 3 (the fleet's leases)", round, kv.InFlight)
		}
		b.reopen()
		for range 3 {
			if c := <-codes; c != 200 {
				t.Errorf("round %d: held request: %d, want 200", round, c)
			}
		}
	}
}
