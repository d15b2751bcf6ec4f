package integration

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// persistCaddyfile is one rule, api, keyed by the header X-User, with
// limit its limit subdirectives; extra goes in the global option's block.
func persistCaddyfile(limit, extra string) string {
	return `{
	{{.Global}}
	rate_limit {
		` + extra + `
	}
}
http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name api
		` + limit + `
		by header X-User
	}
	respond "ok"
}
`
}

// user is the header of the client the tests count.
var user = []string{"X-User", "alice"}

// TestPersistGracefulRestart is the issue's: limit 5 1d, 4 requests, a
// graceful restart: 1 more passes, not 5 (9 in a day against 5).
func TestPersistGracefulRestart(t *testing.T) {
	t.Parallel()
	cf := persistCaddyfile("limit 5 1d", "")
	p := startCaddy(t, cf)
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	p = p.restart(t, cf, false)
	wantStatuses(t, "after a graceful restart", p.statuses(t, 5, "/", user...), seq(1, 200, 4, 429))
	if !strings.Contains(p.log(), `"rule":"api","keys":1`) || !strings.Contains(p.log(), `"counters":"restored from the snapshot"`) {
		t.Errorf("no restore lines for rule api in the log:\n%s", p.log())
	}
}

// TestPersistKill: SIGKILL 2 s after the last request, with the default
// persist_interval of 1s: nothing is lost.
func TestPersistKill(t *testing.T) {
	t.Parallel()
	cf := persistCaddyfile("limit 5 1d", "")
	p := startCaddy(t, cf)
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	time.Sleep(2 * time.Second) // the scenario: a crash 2 s after the last request
	p = p.restart(t, cf, true)
	wantStatuses(t, "after SIGKILL", p.statuses(t, 5, "/", user...), seq(1, 200, 4, 429))
}

// TestPersistBucketRefill: a token bucket of 4 per 8s (a unit every 2s)
// emptied, then restarted: 5 s after the last request it holds 2 units,
// refilled for the time it was down and no more. A bucket of 2 per hour
// holds none.
func TestPersistBucketRefill(t *testing.T) {
	t.Parallel()
	cf := `{
	{{.Global}}
}
http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name fast
		limit 4 8s
		algorithm token_bucket
		by header X-User
	}
	rate_limit {
		name slow
		limit 2 1h
		algorithm token_bucket
		by header X-Slow
	}
	respond "ok"
}
`
	slow := []string{"X-Slow", "bob"}
	p := startCaddy(t, cf)
	wantStatuses(t, "slow before", p.statuses(t, 2, "/", slow...), seq(2, 200, 0, 0))
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	last := time.Now()
	p = p.restart(t, cf, false)
	if since := time.Since(last); since > 4500*time.Millisecond {
		t.Fatalf("the restart took %s: too slow for this test's 5 s", since)
	}
	time.Sleep(time.Until(last.Add(5 * time.Second))) // the scenario: 5 s after the last request
	wantStatuses(t, "5 s after", p.statuses(t, 4, "/", user...), seq(2, 200, 2, 429))
	wantStatuses(t, "slow after", p.statuses(t, 1, "/", slow...), seq(0, 0, 1, 429))
}

// TestPersistBlockEscalation: a block survives a restart with its end, and
// the offence count with it: the key's next block, after the first ends,
// is the escalated one.
func TestPersistBlockEscalation(t *testing.T) {
	t.Parallel()
	cf := persistCaddyfile("limit 2 1h\n\t\tblock_for 2s 1h", "")
	p := startCaddy(t, cf)
	wantStatuses(t, "before", p.statuses(t, 3, "/", user...), seq(2, 200, 1, 429))
	blocked := time.Now()
	p = p.restart(t, cf, false)
	if s := p.keyState(t, "api", "alice"); s.BlockedUntil == nil || s.Offences != 1 {
		t.Fatalf("after the restart: %+v, want a block of offence 1", s)
	}
	time.Sleep(time.Until(blocked.Add(2500 * time.Millisecond))) // the first block ends
	code, h, _ := p.get(t, "/", user...)
	if ra, _ := strconv.Atoi(h.Get("Retry-After")); code != 429 || ra < 3500 {
		t.Fatalf("after the first block: %d Retry-After %q, want 429 and the second block's hour", code, h.Get("Retry-After"))
	}
	if s := p.keyState(t, "api", "alice"); s.Offences != 2 {
		t.Errorf("offences %d, want 2", s.Offences)
	}
}

// TestPersistLimitChanged: a limit changed while Caddy was down keeps the
// units used, as a reload does: 4 of 5 used, then 10: 6 pass.
func TestPersistLimitChanged(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, persistCaddyfile("limit 5 1d", ""))
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	p = p.restart(t, persistCaddyfile("limit 10 1d", ""), false)
	wantStatuses(t, "after", p.statuses(t, 8, "/", user...), seq(6, 200, 2, 429))
}

// TestPersistCorrupt: a snapshot damaged while Caddy was down: Caddy
// starts, warns naming the storage key, and the rule counts afresh.
func TestPersistCorrupt(t *testing.T) {
	t.Parallel()
	cf := persistCaddyfile("limit 5 1d", "")
	p := startCaddy(t, cf)
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	p.stop()
	var damaged []string
	filepath.WalkDir(p.data.Storage, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, "/rules/api/") {
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)/2], 0o600)
			damaged = append(damaged, path)
		}
		return nil
	})
	if len(damaged) != 1 {
		t.Fatalf("snapshots of rule api: %q, want one", damaged)
	}
	p = p.restart(t, cf, false)
	wantStatuses(t, "after", p.statuses(t, 6, "/", user...), seq(5, 200, 1, 429))
	key, _ := filepath.Rel(p.data.Storage, damaged[0])
	if !strings.Contains(p.log(), "rate limit snapshot not restored; the rule starts afresh") || !strings.Contains(p.log(), key) {
		t.Errorf("no warning naming %s in the log:\n%s", key, p.log())
	}
}

// TestPersistOff: persist off writes nothing and a restart starts afresh;
// the metrics say how the snapshots go when on.
func TestPersistOff(t *testing.T) {
	t.Parallel()
	on := startCaddy(t, persistCaddyfile("limit 5 1d", "persist_interval 200ms"))
	wantStatuses(t, "on", on.statuses(t, 2, "/", user...), seq(2, 200, 0, 0))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, metrics := on.admin(t, http.MethodGet, "/metrics", "")
		if metricValue(t, metrics, "caddy_rate_limit_snapshot_keys_written_total") == "1" {
			if got := metricValue(t, metrics, "caddy_rate_limit_snapshot_errors_total"); got != "0" {
				t.Errorf("snapshot errors %s, want 0", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no key written within 5s:\n%s", metrics)
		}
		time.Sleep(50 * time.Millisecond) // the poll's interval
	}
	var overview struct {
		Snapshots struct {
			Enabled     bool      `json:"enabled"`
			LastSuccess time.Time `json:"last_success"`
		} `json:"snapshots"`
	}
	on.adminJSON(t, "/rate_limit/", &overview)
	if !overview.Snapshots.Enabled || time.Since(overview.Snapshots.LastSuccess) > 5*time.Second {
		t.Errorf("admin API snapshots: %+v", overview.Snapshots)
	}

	cf := persistCaddyfile("limit 5 1d", "persist off")
	p := startCaddy(t, cf)
	wantStatuses(t, "before", p.statuses(t, 4, "/", user...), seq(4, 200, 0, 0))
	p = p.restart(t, cf, false)
	wantStatuses(t, "after", p.statuses(t, 5, "/", user...), seq(5, 200, 0, 0))
	if _, err := os.Stat(filepath.Join(p.data.Storage, "rate_limit")); err == nil {
		t.Error("persist off wrote to the storage")
	}
}

// persistClusterCaddyfile is a rule of scope cluster.
const persistClusterCaddyfile = clusterGlobals + `http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name api
		limit 100 1h
		by header X-User
		scope cluster
	}
	respond "ok"
}
`

// TestPersistClusterNode: a node of a cluster restarted gracefully
// restores its own use of a key, and rejoins.
func TestPersistClusterNode(t *testing.T) {
	needCaddy(t)
	t.Parallel()
	nodes := startNodes(t, 2, caddyOf(t, persistClusterCaddyfile))
	wantStatuses(t, "node 1", nodes[0].statuses(t, 20, "/", user...), seq(20, 200, 0, 0))
	before := nodes[0].keyState(t, "api", "alice")
	restarted := nodes[0].restart(t, persistClusterCaddyfile, false)
	restarted.waitMembers(t, 2)
	after := restarted.keyState(t, "api", "alice")
	if len(before.Limits) == 0 || len(after.Limits) == 0 || after.Limits[0].Used != before.Limits[0].Used || after.Limits[0].Used == 0 {
		t.Errorf("key state before %+v, after the restart %+v: want the same units used", before, after)
	}
}
