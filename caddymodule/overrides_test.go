package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// setOverride puts key's override in force on h's first rule.
func setOverride(t *testing.T, h *Handler, key string, factor float64, expires time.Time) {
	t.Helper()
	if err := h.rules[0].overrides.Set(limiter.Override{Key: key, Factor: factor, Expires: expires, SetAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestOverrideScalesLimits: on limit 5 an hour, a key at factor 2 passes
// exactly 10, one at 0.4 exactly 2, one at 0 none until its override is
// removed, one whose override has expired 5; a key without one 5, and the
// override multiplies a tier's factor.
func TestOverrideScalesLimits(t *testing.T) {
	rule := hourly("api", 5)
	rule.Tiers, rule.TierBy = map[string][]string{"pro": {"10/1h"}}, "header X-Plan"
	h := testHandler(t, testApp(), rule)
	from := func(ip string, plan ...string) func() *http.Request {
		return func() *http.Request {
			r := newRequest(ip)
			if len(plan) > 0 {
				r.Header.Set("X-Plan", plan[0])
			}
			return r
		}
	}
	setOverride(t, h, "192.0.2.1", 2, time.Time{})
	setOverride(t, h, "192.0.2.2", 0.4, time.Now().Add(time.Hour))
	setOverride(t, h, "192.0.2.3", 0, time.Time{})
	setOverride(t, h, "192.0.2.4", 3, time.Now().Add(-time.Nanosecond)) // ended
	setOverride(t, h, "192.0.2.5", 3, time.Time{})
	for _, c := range []struct {
		ip   string
		plan []string
		want int
	}{{"192.0.2.1", nil, 10}, {"192.0.2.2", nil, 2}, {"192.0.2.3", nil, 0}, {"192.0.2.4", nil, 5}, {"192.0.2.9", nil, 5}, {"192.0.2.5", []string{"pro"}, 30}} {
		if got := admitted(t, h, c.want+3, from(c.ip, c.plan...)); got != c.want {
			t.Errorf("%s %v: %d admitted, want %d", c.ip, c.plan, got, c.want)
		}
	}
	if _, ok := h.rules[0].overrides.Remove("192.0.2.3", time.Now(), "test"); !ok {
		t.Fatal("no override to remove")
	}
	if got := admitted(t, h, 6, from("192.0.2.3")); got != 5 {
		t.Errorf("after the removal: %d admitted, want 5", got)
	}
}

// TestOverrideRefusalHeaders: a key at factor 0 is answered 429 at once,
// with Retry-After the longest window and the rule's RateLimit fields.
func TestOverrideRefusalHeaders(t *testing.T) {
	h := testHandler(t, testApp(), hourly("api", 5))
	setOverride(t, h, "192.0.2.1", 0, time.Time{})
	w := httptest.NewRecorder()
	err := h.ServeHTTP(w, newRequest("192.0.2.1"), ok)
	he, _ := err.(caddyhttp.HandlerError)
	if he.StatusCode != 429 || w.Header().Get("Retry-After") != "3600" || w.Header().Get("RateLimit") == "" {
		t.Errorf("factor 0: %v, headers %v", err, w.Header())
	}
}

// TestOverridesKeptByName: a rule's overrides are the registry's, by
// name: a second provisioning of the name (a reload) finds them, and
// max_overrides takes the new bound.
func TestOverridesKeptByName(t *testing.T) {
	r := hourly("overrides-kept", 5)
	registry.acquire(r.Name, limiter.Config{Limits: []limiter.Limit{{Count: 5, Window: time.Hour}}})
	defer registry.release(r.Name)
	o := registry.overridesFor(r)
	if err := o.Set(limiter.Override{Key: "k", Factor: 2, SetAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r.MaxOverrides = 7
	if again := registry.overridesFor(r); again != o || again.Max() != 7 {
		t.Fatalf("a reload's overrides: %p (max %d), want %p", again, again.Max(), o)
	}
	for i := range 6 {
		if err := o.Set(limiter.Override{Key: strconv.Itoa(i), Factor: 2, SetAt: time.Now()}); err != nil {
			t.Fatalf("override %d: %v", i+2, err)
		}
	}
	if err := o.Set(limiter.Override{Key: "8th", Factor: 2, SetAt: time.Now()}); err != ErrOverridesFull {
		t.Fatalf("8th past max_overrides 7: %v", err)
	}
}

// TestOverrideExpiredLine: the sweep forgets an override that has ended
// and logs it once, "expired", with the setter as who.
func TestOverrideExpiredLine(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	app := &App{logger: zap.New(core)}
	prev := activeApp.Swap(app)
	defer activeApp.Store(prev)
	o := limiter.NewOverrides(0)
	t0 := time.Unix(1_800_000_000, 0)
	o.Set(limiter.Override{Key: "k", Factor: 2, Expires: t0.Add(time.Hour), SetAt: t0, SetBy: "127.0.0.1:9"})
	sweepOverrides("api", o, t0.Add(time.Hour-time.Nanosecond))
	if logs.Len() != 0 || o.Len() != 1 {
		t.Fatalf("swept before its end: %d lines, %d left", logs.Len(), o.Len())
	}
	sweepOverrides("api", o, t0.Add(time.Hour))
	sweepOverrides("api", o, t0.Add(2*time.Hour))
	got := logs.All()
	if len(got) != 1 || o.Len() != 0 {
		t.Fatalf("%d lines, %d left; want 1, 0", len(got), o.Len())
	}
	f := got[0].ContextMap()
	if got[0].Message != "rate limit override expired" || f["rule"] != "api" || f["key"] != "k" || f["factor"] != 2.0 || f["who"] != "127.0.0.1:9" || f["what"] != "expired" || f["expires"] != "2027-01-15T09:00:00Z" {
		t.Errorf("line %q %v", got[0].Message, f)
	}
}

// TestOverrideBatches: the overrides sent to a joining node fit a gossip
// message each, and all of them are sent.
func TestOverrideBatches(t *testing.T) {
	var es []limiter.Override
	for i := range 500 {
		es = append(es, limiter.Override{Key: strings.Repeat("k", i%1024+1), Factor: 2, SetAt: time.Now(), SetBy: "127.0.0.1:12345"})
	}
	n := 0
	for _, b := range overrideBatches(es, gossip.MaxKeyBytes) {
		if got := len(limiter.AppendOverrides(nil, b, time.Now())); got > gossip.MaxKeyBytes {
			t.Fatalf("a batch of %d takes %d bytes", len(b), got)
		}
		n += len(b)
	}
	if n != len(es) {
		t.Fatalf("%d of %d sent", n, len(es))
	}
}

// TestOverrideZeroStartsNoBlock: a key refused by an override at 0 on a
// rule with block_for is not blocked, so it passes as soon as the
// override is removed.
func TestOverrideZeroStartsNoBlock(t *testing.T) {
	rule := hourly("api", 5)
	rule.BlockFor = []caddy.Duration{caddy.Duration(time.Hour)}
	h := testHandler(t, testApp(), rule)
	var err error
	if h.rules[0].abuse.blocks, err = limiter.NewBlocks([]time.Duration{time.Hour}, 0, 0); err != nil {
		t.Fatal(err)
	}
	setOverride(t, h, "192.0.2.1", 0, time.Time{})
	from := func() *http.Request { return newRequest("192.0.2.1") }
	if got := admitted(t, h, 3, from); got != 0 {
		t.Fatalf("factor 0: %d admitted", got)
	}
	h.rules[0].overrides.Remove("192.0.2.1", time.Now(), "test")
	if got := admitted(t, h, 6, from); got != 5 {
		t.Errorf("after the removal: %d admitted, want 5 (no block)", got)
	}
}
