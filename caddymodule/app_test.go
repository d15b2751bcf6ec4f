package caddymodule

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

func hourlyLimit(n int64) limiter.Config {
	return limiter.Config{Limits: []limiter.Limit{{Count: n, Window: time.Hour}}}
}

// ruleWith is a rule named name with cfg's limits and burst.
func ruleWith(name string, cfg limiter.Config) ruleconfig.Rule {
	r := ruleconfig.Rule{Name: name, Burst: cfg.Burst}
	for _, l := range cfg.Limits {
		r.Limits = append(r.Limits, ruleconfig.Limit{Count: l.Count, Window: caddy.Duration(l.Window)})
	}
	return r
}

// runningRule puts rule name in force under cfg, as a running config
// would, and returns its limiter; the rule is released at the end.
func runningRule(t *testing.T, name string, cfg limiter.Config) *limiter.Limiter {
	t.Helper()
	running := testApp()
	lim, _, err := running.limiterFor(ruleWith(name, cfg), false)
	if err != nil {
		t.Fatal(err)
	}
	running.commit()
	t.Cleanup(func() { registry.release(name) })
	return lim
}

// TestRegistryCommitAndRevert: a reload's limits apply when it commits, and
// a config that fails to start (cleaned up while it still owns the rule)
// puts the running config's limits back.
func TestRegistryCommitAndRevert(t *testing.T) {
	const name = "test commit and revert"
	lim := runningRule(t, name, hourlyLimit(5))

	failing := testApp()
	same, _, err := failing.limiterFor(ruleWith(name, hourlyLimit(50)), false)
	if err != nil {
		t.Fatal(err)
	}
	if same != lim {
		t.Fatal("a limit change should keep the limiter")
	}
	if got := lim.Config().Limits[0].Count; got != 5 {
		t.Fatalf("before the new config commits: limit %d, want 5", got)
	}
	failing.commit()
	if got := lim.Config().Limits[0].Count; got != 50 {
		t.Fatalf("after commit: limit %d, want 50", got)
	}
	failing.Cleanup()
	registry.release(name)
	if got := lim.Config().Limits[0].Count; got != 5 {
		t.Fatalf("after the failed config's cleanup: limit %d, want 5 again", got)
	}
}

// TestRegistrySuccessorAdoptsAtCommit: a layout change gives the new config
// a successor that takes the running counters when it commits, and a
// failed start puts the running limiter back in the registry.
func TestRegistrySuccessorAdoptsAtCommit(t *testing.T) {
	const name = "test successor"
	lim := runningRule(t, name, hourlyLimit(5))
	now := time.Now()
	for range 3 {
		lim.AllowAt("k", now, 1)
	}

	next := testApp()
	cfg := hourlyLimit(5)
	cfg.Burst = 10
	succ, _, err := next.limiterFor(ruleWith(name, cfg), false)
	if err != nil {
		t.Fatal(err)
	}
	if succ == lim {
		t.Fatal("adding a burst should make a successor")
	}
	next.commit()
	if d := succ.PeekAt("k", now, 0); d.Quotas[0].Remaining != 2 {
		t.Fatalf("successor: %d remaining, want 2 (the running counters)", d.Quotas[0].Remaining)
	}
	next.Cleanup()
	registry.release(name)
	registry.mu.Lock()
	got := registry.byName[name].lim
	registry.mu.Unlock()
	if got != lim {
		t.Fatal("after a failed start the registry should hold the running limiter again")
	}
}

// testApp is an App as Provision leaves it without options: a logger,
// and none of the concerns.
func testApp() *App { return &App{logger: zap.NewNop()} }
