package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/debpkg"
	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/monitoring"
)

// monitoringConfig exports every metric family of the plugin: rules of
// every kind, a Redis store, a cluster of one and a jwt block.
const monitoringConfig = `{
	{{.Global}}
	rate_limit {
		store redis {
			address {env.EDGELIMIT_REDIS}
		}
		cluster {
			bind {$EDGELIMIT_GOSSIP_BIND}
			node_name monitored
			sync_interval 100ms
		}
		jwt {
			hmac_secret {env.EDGELIMIT_JWT_SECRET}
			algorithms HS256
		}
	}
}

:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit 5 1m
		by header X-Key
		block_for 1m
		max_keys 20
	}
	rate_limit /shadow/* {
		name shadow
		limit 1 1m
		by header X-Key
		shadow
	}
	rate_limit /conc/* {
		name conc
		max_concurrent 1
		by header X-Key
	}
	rate_limit /leaky/* {
		name leaky
		limit 100 1s
		algorithm leaky_bucket
		burst 2
		by header X-Key
	}
	rate_limit /redis/* {
		name redis
		limit 5 1m
		by header X-Key
		store redis
	}
	rate_limit /cost/* {
		name cost
		limit 1000 1m
		by header X-Key
		cost_header X-Cost
	}
	rate_limit /jwt/* {
		name jwt
		limit 5 1m
		by jwt sub
		on_missing_key ip
	}
	rate_limit /fleet/* {
		name fleet
		limit 5 1m
		by header X-Key
		scope cluster
	}
	respond "ok"
}
`

// TestMonitoringQueries runs a real Prometheus (Debian's package,
// installed if missing) scraping a real Caddy under traffic, with the
// project's rules file loaded: every metric the rules and the dashboard
// read is on the live /metrics, every dashboard query and every rule
// expression evaluates without error, most return data, and Prometheus
// reports every rule healthy.
func TestMonitoringQueries(t *testing.T) {
	needCaddy(t)
	promBin := needPrometheus(t)
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "monitoring")
	srv := redistest.Start(t)
	gossip := freePorts(t, 1)[0]
	p := startCaddy(t, monitoringConfig, "EDGELIMIT_REDIS="+srv.Addr,
		fmt.Sprintf("EDGELIMIT_GOSSIP_BIND=127.0.0.1:%d", gossip), "EDGELIMIT_JWT_SECRET=monitoring-secret-of-32-bytes-or-more")

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); monitoredTraffic(ctx, p) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	prom := startPrometheus(t, promBin, p.data.Admin, filepath.Join(dir, "edgelimit.rules.yml"))
	// five scrapes at least, so that every rate over 10s has samples
	prom.waitFor(t, `count_over_time(up{job="caddy"}[1m]) >= 5`, 60*time.Second)

	live := liveMetricNames(t, p)
	dashboard, err := monitoring.DashboardExprs(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := monitoring.RuleExprs(filepath.Join(dir, "edgelimit.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for i, e := range dashboard {
		exprs[fmt.Sprintf("dashboard query %d", i+1)] = monitoring.Evaluable(e, "10s")
	}
	for name, e := range rules {
		exprs["rule "+name] = e
	}
	names := regexp.MustCompile(`[a-z_:]*caddy_rate_limit_[a-z_:]*`) // a recorded series has colons
	var empty []string
	for _, what := range sortedKeys(exprs) {
		e := exprs[what]
		for _, m := range names.FindAllString(e, -1) {
			if !strings.Contains(m, ":") && !live[strings.TrimSuffix(m, "_bucket")] {
				t.Errorf("%s reads %s, which the live /metrics does not have: %s", what, m, e)
			}
		}
		n, err := prom.query(e)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if n == 0 {
			empty = append(empty, what)
		}
	}
	// Alerts and a few rates (gossip dropped, store fallbacks) are empty on
	// a healthy node: that is what they are for.
	t.Logf("%d expressions, %d without data: %s", len(exprs), len(empty), strings.Join(empty, ", "))
	if 2*len(empty) > len(exprs) {
		t.Errorf("%d of %d expressions returned no data, want most to return some: %s", len(empty), len(exprs), strings.Join(empty, ", "))
	}
	for _, name := range []string{"rule:caddy_rate_limit_requests:rate5m", "rule:caddy_rate_limit_denial_ratio:rate5m", "instance_rule:caddy_rate_limit_keys_fill:ratio"} {
		prom.waitFor(t, name, 30*time.Second) // recorded by Prometheus's rule evaluation
	}
	prom.rulesHealthy(t, len(rules))
}

// monitoredTraffic sends the monitored Caddy a mix that moves every
// family: denials, blocks, shadow denials, requests in flight, a held
// request, Redis decisions, cost header errors, bad tokens, evictions.
func monitoredTraffic(ctx context.Context, p *caddyProc) {
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		for _, path := range []string{"/api/x", "/shadow/x", "/conc/x", "/leaky/x", "/redis/x", "/cost/x", "/fleet/x", "/jwt/x"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url(path), nil)
			req.Header.Set("X-Key", fmt.Sprintf("k%d", i%30)) // past api's max_keys 20: evictions
			if path == "/jwt/x" {
				req.Header.Set("Authorization", "Bearer not.a.token")
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// liveMetricNames are the metric families on Caddy's /metrics.
func liveMetricNames(t *testing.T, p *caddyProc) map[string]bool {
	t.Helper()
	code, body := p.admin(t, http.MethodGet, "/metrics", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
		}
	}
	return names
}

// needPrometheus is the path of Debian's prometheus, installed if missing.
func needPrometheus(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if err := debpkg.Install("prometheus"); err != nil {
		t.Skipf("prometheus cannot be installed: %v", err)
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skipf("prometheus installed but not found: %v", err)
	}
	return p
}

// promProc is a running Prometheus.
type promProc struct {
	url string
	log *syncBuffer
}

// startPrometheus runs Prometheus scraping Caddy's admin endpoint every
// second, with rulesFile evaluated every second, and waits until it is
// ready. It is stopped when t ends.
func startPrometheus(t *testing.T, bin, admin, rulesFile string) *promProc {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: caddy
    static_configs:
      - targets: [%q]
`, rulesFile, admin)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	pr := &promProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), log: &syncBuffer{}}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	cmd.Stdout, cmd.Stderr = pr.log, pr.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", pr.log.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(pr.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return pr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", pr.log.String())
		}
	}
}

// query evaluates expr now, and says how many series or samples it
// returned.
func (pr *promProc) query(expr string) (int, error) {
	resp, err := http.Get(pr.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s (%s)", r.Error, expr)
	}
	var series []json.RawMessage
	if json.Unmarshal(r.Data.Result, &series) != nil {
		return 1, nil // a scalar
	}
	return len(series), nil
}

// waitFor waits until expr returns data.
func (pr *promProc) waitFor(t *testing.T, expr string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(250 * time.Millisecond) {
		if n, err := pr.query(expr); err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s returned nothing for %s", expr, limit)
		}
	}
}

// rulesHealthy checks that Prometheus evaluated n rules, every one healthy.
func (pr *promProc) rulesHealthy(t *testing.T, n int) {
	t.Helper()
	resp, err := http.Get(pr.url + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			seen++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q, last error %q", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if seen != n {
		t.Errorf("prometheus loaded %d rules, want %d", seen, n)
	}
}

// sortedKeys are m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
