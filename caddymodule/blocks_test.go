package caddymodule

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/limiter"
)

// abuseHandler is testHandler with the rules' blocks made, as Provision
// takes them from the registry.
func abuseHandler(tb testing.TB, rules ...ruleconfig.Rule) *Handler {
	tb.Helper()
	h := testHandler(tb, testApp(), rules...)
	for _, r := range h.rules {
		if len(r.BlockFor) > 0 && !r.Shadow {
			b, err := limiter.NewBlocks(r.BlockDurations(), time.Duration(r.BlockReset), 0)
			if err != nil {
				tb.Fatal(err)
			}
			r.abuse.blocks = b
		}
	}
	return h
}

// answering is a handler that answers status, with header set.
func answering(status int, header, value string) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if header != "" {
			w.Header().Set(header, value)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("body"))
		return nil
	})
}

// serve runs r through h then next, and returns the recorder and the
// status (a returned handler error's, if any).
func serve(t *testing.T, h *Handler, next caddyhttp.Handler, ip string) (*httptest.ResponseRecorder, int) {
	t.Helper()
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, newRequest(ip), next)
	if he, ok := err.(caddyhttp.HandlerError); ok {
		return w, he.StatusCode
	} else if err != nil {
		t.Fatal(err)
	}
	return w, w.Code
}

func TestCountStatusTakesOnlyMatching(t *testing.T) {
	rule := hourly("login", 3)
	rule.CountStatus = []string{"401", "403"}
	h := abuseHandler(t, rule)
	for range 10 { // successes take nothing
		if _, s := serve(t, h, answering(200, "", ""), "192.0.2.1"); s != 200 {
			t.Fatalf("success: got %d", s)
		}
	}
	ru := h.rules[0]
	if d := ru.lim.PeekAt("192.0.2.1", time.Now(), 0); d.Quotas[0].Remaining != 3 {
		t.Fatalf("after 10 successes: %d remaining, want 3", d.Quotas[0].Remaining)
	}
	for i := range 3 { // failures are counted, after the response
		w, s := serve(t, h, answering(401, "", ""), "192.0.2.1")
		if s != 401 || !strings.HasPrefix(w.Header().Get("RateLimit"), `"login";r=`+string(rune('2'-i))+`;`) {
			t.Fatalf("failure %d: got %d, RateLimit %q", i, s, w.Header().Get("RateLimit"))
		}
	}
	if _, s := serve(t, h, answering(200, "", ""), "192.0.2.1"); s != 429 {
		t.Fatalf("after 3 failures: got %d, want 429 (no unit left)", s)
	}
	if _, s := serve(t, h, answering(200, "", ""), "192.0.2.2"); s != 200 {
		t.Fatalf("another key: got %d", s)
	}
}

func TestCountStatusHandlerErrorAndClass(t *testing.T) {
	rule := hourly("login", 2)
	rule.CountStatus = []string{"4xx"}
	h := abuseHandler(t, rule)
	failing := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return caddyhttp.Error(http.StatusForbidden, nil)
	})
	for range 2 {
		if _, s := serve(t, h, failing, "192.0.2.1"); s != 403 {
			t.Fatalf("got %d", s)
		}
	}
	if _, s := serve(t, h, failing, "192.0.2.1"); s != 429 {
		t.Fatalf("after 2 errors of status 403: got %d, want 429", s)
	}
}

func TestBlockStartsOnDenialAndRefuses(t *testing.T) {
	rule := hourly("login", 2)
	rule.Limits[0].Window = caddy.Duration(10 * time.Second)
	rule.BlockFor = []caddy.Duration{caddy.Duration(time.Minute), caddy.Duration(time.Hour)}
	rule.ProblemJSON = true
	h := abuseHandler(t, rule)
	for range 2 {
		serve(t, h, ok, "192.0.2.1")
	}
	w, s := serve(t, h, ok, "192.0.2.1") // the denial starts the block
	if s != 429 || w.Header().Get("Retry-After") != "60" || !strings.Contains(w.Body.String(), "#quota-exceeded") {
		t.Fatalf("denial: %d Retry-After %q %s", s, w.Header().Get("Retry-After"), w.Body)
	}
	w, s = serve(t, h, ok, "192.0.2.1") // refused by the block
	if s != 429 || w.Header().Get("Retry-After") != "60" || !strings.Contains(w.Body.String(), "#abnormal-usage-detected") ||
		w.Header().Get("RateLimit") != `"login";r=0;t=60` {
		t.Fatalf("blocked: %d Retry-After %q RateLimit %q %s", s, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Body)
	}
	if b, ok := h.rules[0].abuse.blocks.InfoAt("192.0.2.1", time.Now()); !ok || b.Offences != 1 {
		t.Fatalf("block: %+v %v", b, ok)
	}
	if _, s := serve(t, h, ok, "192.0.2.2"); s != 200 {
		t.Fatalf("another key: %d", s)
	}
}

func TestShadowBlocksNoOne(t *testing.T) {
	rule := hourly("s", 1)
	rule.Shadow, rule.BlockFor = true, []caddy.Duration{caddy.Duration(time.Hour)}
	h := abuseHandler(t, rule)
	for range 5 {
		if _, s := serve(t, h, ok, "192.0.2.1"); s != 200 {
			t.Fatalf("shadow: got %d", s)
		}
	}
}

func TestCostHeader(t *testing.T) {
	rule := hourly("llm", 100)
	rule.CostHeader = "X-Tokens"
	h := abuseHandler(t, rule)
	ru := h.rules[0]
	left := func() int64 { return ru.lim.PeekAt("192.0.2.1", time.Now(), 0).Quotas[0].Remaining }
	w, s := serve(t, h, answering(200, "X-Tokens", "42"), "192.0.2.1")
	if s != 200 || w.Header().Get("X-Tokens") != "" || left() != 58 {
		t.Fatalf("got %d, X-Tokens %q, %d left; want 200, stripped, 58", s, w.Header().Get("X-Tokens"), left())
	}
	serve(t, h, answering(200, "X-Tokens", "lots"), "192.0.2.1")
	serve(t, h, answering(200, "", ""), "192.0.2.1")
	if left() != 56 || ru.stats.abuse.costHeaderErrors.Load() != 2 {
		t.Fatalf("invalid and absent: %d left, %d errors; want 56, 2", left(), ru.stats.abuse.costHeaderErrors.Load())
	}
	serve(t, h, answering(200, "X-Tokens", "0"), "192.0.2.1")
	serve(t, h, answering(200, "X-Tokens", "500"), "192.0.2.1") // past the limit: later requests wait
	if left() != 0 {
		t.Fatalf("%d left, want 0", left())
	}
	if _, s := serve(t, h, answering(200, "X-Tokens", "1"), "192.0.2.1"); s != 429 {
		t.Fatalf("in debt: got %d, want 429", s)
	}
}

// TestCostHeaderSaturates: a report too large for an int64 takes all the
// limit has, as the largest int64 does, not the reservation of an invalid
// one; a negative or non-numeric one is still invalid.
func TestCostHeaderSaturates(t *testing.T) {
	for i, tc := range []struct {
		value    string
		left     int64
		errors   uint64
		nextCode int
	}{
		{"9223372036854775807", 0, 0, 429},
		{"9223372036854775808", 0, 0, 429},
		{"+99999999999999999999999999999", 0, 0, 429},
		{" 18446744073709551616 ", 0, 0, 429},
		{"-9223372036854775809", 99, 1, 200},
		{"-1", 99, 1, 200},
		{"1e30", 99, 1, 200},
		{"99", 1, 0, 200},
	} {
		rule := hourly("llm", 100)
		rule.CostHeader = "X-Tokens"
		h := abuseHandler(t, rule)
		ru := h.rules[0]
		serve(t, h, answering(200, "X-Tokens", tc.value), "192.0.2.1")
		left := ru.lim.PeekAt("192.0.2.1", time.Now(), 0).Quotas[0].Remaining
		if left != tc.left || ru.stats.abuse.costHeaderErrors.Load() != tc.errors {
			t.Errorf("Test %d: X-Tokens %q: %d left, %d errors; want %d, %d", i, tc.value, left, ru.stats.abuse.costHeaderErrors.Load(), tc.left, tc.errors)
		}
		if _, s := serve(t, h, answering(200, "X-Tokens", "1"), "192.0.2.1"); s != tc.nextCode {
			t.Errorf("Test %d: X-Tokens %q: the next request got %d, want %d", i, tc.value, s, tc.nextCode)
		}
	}
}

func TestCostHeaderWithCountStatus(t *testing.T) {
	rule := hourly("llm", 100)
	rule.CostHeader, rule.CountStatus = "X-Tokens", []string{"2xx"}
	h := abuseHandler(t, rule)
	ru := h.rules[0]
	w, _ := serve(t, h, answering(500, "X-Tokens", "30"), "192.0.2.1")
	if w.Header().Get("X-Tokens") != "" {
		t.Fatal("header not stripped on a status that takes nothing")
	}
	serve(t, h, answering(201, "X-Tokens", "30"), "192.0.2.1")
	if r := ru.lim.PeekAt("192.0.2.1", time.Now(), 0).Quotas[0].Remaining; r != 70 {
		t.Fatalf("%d left, want 70", r)
	}
}

func TestAfterCancelledByLaterDenial(t *testing.T) {
	counted := hourly("counted", 10)
	counted.CountStatus = []string{"4xx"}
	first, second := abuseHandler(t, counted), testHandler(t, testApp(), hourly("narrow", 1))
	first.app.handlers, second.app = 2, first.app
	h := chain(first, second)
	for range 3 {
		status(t, h, newRequest("192.0.2.1"))
	}
	// the two 429s of narrow took nothing from counted
	if r := first.rules[0].lim.PeekAt("192.0.2.1", time.Now(), 0).Quotas[0].Remaining; r != 10 {
		t.Fatalf("%d left, want 10", r)
	}
}

// hijackable is a recorder that can be hijacked and flushed.
type hijackable struct {
	*httptest.ResponseRecorder
	hijacked bool
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.hijacked = true
	return nil, nil, nil
}

func TestAfterWriterKeepsInterfaces(t *testing.T) {
	rule := hourly("c", 10)
	rule.CountStatus = []string{"101"}
	h := abuseHandler(t, rule)
	rec := &hijackable{ResponseRecorder: httptest.NewRecorder()}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok {
			t.Error("no Unwrap")
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Error("not a Flusher")
		}
		_, _, err := w.(http.Hijacker).Hijack()
		return err
	})
	if err := h.ServeHTTP(rec, newRequest("192.0.2.1"), next); err != nil || !rec.hijacked {
		t.Fatalf("err %v hijacked %v", err, rec.hijacked)
	}
	if r := h.rules[0].lim.PeekAt("192.0.2.1", time.Now(), 0).Quotas[0].Remaining; r != 9 {
		t.Fatalf("a hijack counts as 101: %d left, want 9", r)
	}
}

// BenchmarkAbuse is what abuse response costs a request: a rule without
// it ("plain", allowed), one with count_status (checked before, the
// writer wrapped, charged after a matching status), a key denied by its
// limits (as an error for handle_errors routes, or "written": in a server
// without them, where the handler writes the 429), and a key refused by a
// block.
func BenchmarkAbuse(b *testing.B) {
	plain := hourly("plain", 1<<31)
	counted := hourly("counted", 1<<31)
	counted.CountStatus = []string{"401"}
	denied := hourly("denied", 1)
	blocked := hourly("blocked", 1)
	blocked.BlockFor = []caddy.Duration{caddy.Duration(time.Hour)}
	for _, bc := range []struct {
		name   string
		rule   ruleconfig.Rule
		next   caddyhttp.Handler
		want   int
		server *caddyhttp.Server // nil: outside a server (as with handle_errors: the denial is an error)
	}{
		{"plain", plain, ok, 200, nil},
		{"count_status-200", counted, ok, 200, nil},
		{"count_status-401", counted, answering(401, "", ""), 401, nil},
		{"denied", denied, ok, 429, nil},
		{"denied-written", denied, ok, 429, &caddyhttp.Server{}}, // no handle_errors: the handler writes the 429
		{"blocked", blocked, ok, 429, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := abuseHandler(b, bc.rule)
			base := newRequest("5.255.255.7")
			if bc.server != nil {
				base = base.WithContext(context.WithValue(base.Context(), caddyhttp.ServerCtxKey, bc.server))
			}
			h.ServeHTTP(httptest.NewRecorder(), base, bc.next) // takes the one unit
			h.ServeHTTP(httptest.NewRecorder(), base, bc.next) // denied: starts the block
			w := &statusWriter{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.header)
				w.code = 0
				vars := map[string]any{caddyhttp.ClientIPVarKey: "5.255.255.7"}
				r := base.WithContext(context.WithValue(base.Context(), caddyhttp.VarsCtxKey, vars))
				if err := h.ServeHTTP(w, r, bc.next); err != nil {
					w.code = err.(caddyhttp.HandlerError).StatusCode
				}
			}
			if w.code != bc.want {
				b.Fatalf("status %d, want %d", w.code, bc.want)
			}
		})
	}
}

// statusWriter is a reusable ResponseWriter that keeps the status.
type statusWriter struct {
	header http.Header
	code   int
}

func (w *statusWriter) Header() http.Header         { return w.header }
func (w *statusWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *statusWriter) WriteHeader(code int)        { w.code = code }

// TestBlockedWaitClusterShare: with scope cluster, a refusal by a block
// says the later of the block's rest and the limits' wait at this node's
// share of the key's limit (here, alone in a cluster of 3, the cold
// share of 30 an hour: 11): the share is spent, so the wait is the
// window's, not the block's 5 s.
func TestBlockedWaitClusterShare(t *testing.T) {
	rule := ruleconfig.Rule{Name: "bw", Limits: []ruleconfig.Limit{{Count: 30, Window: caddy.Duration(time.Hour)}}, Algorithm: "fixed_window",
		BlockFor: []caddy.Duration{caddy.Duration(5 * time.Second)}}
	app, _ := clusterApp(3)
	h := sharedHandler(t, app, rule)
	b, err := limiter.NewBlocks(h.rules[0].BlockDurations(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.rules[0].abuse.blocks = b
	var ra []string
	for range 14 {
		w, code := serve(t, h, answering(200, "", ""), "192.0.2.9")
		if code == http.StatusTooManyRequests {
			ra = append(ra, w.Header().Get("Retry-After"))
		}
	}
	if len(ra) != 3 {
		t.Fatalf("%d refusals of 14, want 3 (11 allowed at the share)", len(ra))
	}
	for i, v := range ra {
		if secs, _ := strconv.Atoi(v); secs <= 5 {
			t.Errorf("refusal %d: Retry-After %s, want the window's wait, past the block's 5 s", i+1, v)
		}
	}
}

// TestCountStatusRedisDown: with store redis and Redis gone, a
// count_status rule's reservation applies on_store_error: fail_closed
// answers 503, fail_open lets the request through unlimited, local
// reserves in process at this node's share (here, the whole limit: no
// fleet seen) and settles there.
func TestCountStatusRedisDown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	for _, c := range []struct {
		mode  string
		codes []int // of 4 failed logins on limit 2
	}{
		{ruleconfig.StoreErrorFailClosed, []int{503, 503, 503, 503}},
		{ruleconfig.StoreErrorFailOpen, []int{401, 401, 401, 401}},
		{ruleconfig.StoreErrorLocal, []int{401, 401, 429, 429}},
	} {
		srv := redistest.Start(t)
		rule := hourly("login-"+c.mode, 2)
		rule.CountStatus = []string{"401"}
		rule.Store = ruleconfig.StoreRedis
		rule.OnStoreError = c.mode
		h := redisHandler(t, srv, rule)
		srv.Kill()
		for i, want := range c.codes {
			if _, code := serve(t, h, answering(401, "", ""), "192.0.2.1"); code != want {
				t.Errorf("%s: failed login %d: %d, want %d", c.mode, i+1, code, want)
			}
		}
	}
}

// A lift keeps out every block of the key begun before it, whichever
// node made it and however late it ends (a report sent before the reset
// reached that node), takes a block begun after it, and is forgotten
// when the lifted block would have ended.
func TestLiftedBlocksStale(t *testing.T) {
	l := liftedBlocks{lifts: map[blockID]lift{}}
	at := time.Unix(1_000_000, 0)
	l.remember("api", "k", at.Add(time.Minute), at)
	soon := at.Add(100 * time.Millisecond)
	for _, c := range []struct {
		key           string
		started, told time.Time
		stale         bool
	}{
		{"k", at.Add(-time.Second), soon, true}, // begun before the lift: stale, even ending later
		{"k", at, soon, true},
		{"k", at.Add(time.Millisecond), soon, false}, // a new offence after the lift
		{"other", at.Add(-time.Second), soon, false},
		{"k", at.Add(-time.Second), at.Add(time.Minute), false}, // the lift forgotten
	} {
		if got := l.stale("api", c.key, c.started, c.told); got != c.stale {
			t.Errorf("%s begun %v, told %v: stale %v, want %v", c.key, c.started.Sub(at), c.told.Sub(at), got, c.stale)
		}
	}
}
