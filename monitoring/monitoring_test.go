// Package monitoring holds what an operator imports to watch edgelimit:
// Prometheus rules (edgelimit.rules.yml, with their unit tests in
// edgelimit.rules.test.yml) and a Grafana dashboard
// (grafana-dashboard.json). docs/monitoring.md says how to load them.
// Their expressions are also evaluated against a real Prometheus scraping
// a real Caddy in package integration (TestMonitoringQueries).
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/internal/debpkg"
)

// promtool is the path of Debian's promtool, installed if missing.
func promtool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs promtool (Debian's prometheus package)")
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if err := debpkg.Install("prometheus"); err != nil {
		t.Skipf("promtool cannot be installed: %v", err)
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skipf("prometheus installed, but no promtool: %v", err)
	}
	return p
}

// TestRulesCheck: promtool finds the rules file valid.
func TestRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "edgelimit.rules.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules said:\n%s", out)
	}
}

// TestRulesUnit: every alert fires on the series it watches and stays
// quiet on normal ones (edgelimit.rules.test.yml).
func TestRulesUnit(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "edgelimit.rules.test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestEveryAlertTested: each alert of the rules file has a unit test.
func TestEveryAlertTested(t *testing.T) {
	rules, err := os.ReadFile("edgelimit.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("edgelimit.rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(rules), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(string(tests), "alertname: "+name+"\n") {
			t.Errorf("alert %s has no test in edgelimit.rules.test.yml", name)
		}
	}
	if n < 7 {
		t.Errorf("%d alerts found, want the 7 the file has at least", n)
	}
}

// TestDashboard: the dashboard is JSON Grafana imports: a uid, the
// datasource and rule variables, and a PromQL expression in every target
// that reads one of edgelimit's metrics.
func TestDashboard(t *testing.T) {
	exprs, err := DashboardExprs("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 20 {
		t.Errorf("%d queries, want the 20 the dashboard has at least", len(exprs))
	}
	for _, e := range exprs {
		if !strings.Contains(e, "caddy_rate_limit_") {
			t.Errorf("query %q reads none of edgelimit's metrics", e)
		}
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	b, _ := os.ReadFile("grafana-dashboard.json")
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if d.UID != "edgelimit" || strings.Join(vars, ",") != "datasource,instance,rule" {
		t.Errorf("uid %q, variables %v; want edgelimit and datasource, instance, rule", d.UID, vars)
	}
}

// TestRuleExprs: the rules file's expressions are read by name.
func TestRuleExprs(t *testing.T) {
	exprs, err := RuleExprs("edgelimit.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) != 11 || !strings.HasPrefix(exprs["RateLimitStoreDown"], "caddy_rate_limit_store_up == 0") {
		t.Errorf("%d rules, RateLimitStoreDown %q; want 11 and the store_up test", len(exprs), exprs["RateLimitStoreDown"])
	}
}
