package integration

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// rulesFileCaddyfile authenticates /api/v1/ with basic_auth (users alice
// and bob, password "secret"), then applies the rules of the file named by
// EDGELIMIT_RULES; countries come from CF-IPCountry sent by loopback.
const rulesFileCaddyfile = `{
	{{.Global}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}
	rate_limit {
		geo_header CF-IPCountry
	}
}
:{{.HTTP}} {
	route {
		basic_auth /api/v1/* {
			alice HASH
			bob HASH
		}
		rate_limit {
			rules_file {$EDGELIMIT_RULES}
		}
		respond "ok"
	}
}
`

// startRulesFile runs rulesFileCaddyfile on a rules file holding rules.
func startRulesFile(t *testing.T, rules string) (p *caddyProc, file, config string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	config = strings.ReplaceAll(rulesFileCaddyfile, "HASH", string(hash))
	return startCaddy(t, config, "EDGELIMIT_RULES="+file), file, config
}

// basicAuth is the Authorization header of user with password secret.
func basicAuth(user string) []string {
	return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":secret"))}
}

// TestRulesFileSeed: caddyfile_examples/edgebyte_rules.yaml, whose first
// two rules are the EdgeByte rules file of docs/DESIGN.md, unchanged,
// limits /api/v1/ by user, with a burst of 20 in front of 100 a minute,
// each user on its own; and /api/public/ by client IP at 1000 a minute
// times the country's factor. Its third rule, login, limits only /login,
// which this test does not ask for.
func TestRulesFileSeed(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("../caddyfile_examples/edgebyte_rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := startRulesFile(t, string(rules))
	// 20 back to back (the burst), then one every 0.6 s: 25 requests in
	// far less than 0.6 s get 20 through.
	wantStatuses(t, "alice", p.statuses(t, 25, "/api/v1/x", basicAuth("alice")...), seq(20, 200, 5, 429))
	wantStatuses(t, "bob", p.statuses(t, 25, "/api/v1/x", basicAuth("bob")...), seq(20, 200, 5, 429))

	for i, c := range []struct {
		country string
		want    int
	}{{"RU", 1500}, {"US", 1000}, {"", 500}} {
		headers := func(try int) []string {
			h := xff(fmt.Sprintf("192.0.2.%d", 10*i+try))
			if c.country != "" {
				h = append(h, "CF-IPCountry", c.country)
			}
			return h
		}
		got := admittedInOneWindow(t, p, c.want+50, "/api/public/x", headers)
		if got != c.want {
			t.Errorf("/api/public/ from %q: %d admitted, want %d", c.country, got, c.want)
		}
	}
}

// admittedInOneWindow sends n requests with headers(try) and counts the
// 200s. The sliding window counter weighs the previous minute's count
// once a minute boundary passes, so a run that straddles one is done
// again with the headers of the next try (a new client).
func admittedInOneWindow(t *testing.T, p *caddyProc, n int, path string, headers func(try int) []string) int {
	t.Helper()
	for try := 1; ; try++ {
		start := time.Now()
		got := count(t, n, func() int { return p.status(t, path, headers(try)...) })[200]
		if time.Now().Truncate(time.Minute).Equal(start.Truncate(time.Minute)) || try == 3 {
			return got
		}
	}
}

// TestRulesFileReload: the file is read again on reload; a rule whose
// derived name is unchanged keeps its counters under its new limit.
func TestRulesFileReload(t *testing.T) {
	t.Parallel()
	rules := func(limit int) string {
		return fmt.Sprintf("rate_limit:\n  - path: /api/public/*\n    limit: %d\n    window: 30d\n", limit)
	}
	p, file, config := startRulesFile(t, rules(3))
	wantStatuses(t, "limit 3", p.statuses(t, 4, "/api/public/x"), seq(3, 200, 1, 429))
	if err := os.WriteFile(file, []byte(rules(5)), 0o644); err != nil {
		t.Fatal(err)
	}
	p.forceReload(t, config)
	wantStatuses(t, "limit 5, 3 taken", p.statuses(t, 3, "/api/public/x"), seq(2, 200, 1, 429))
}

// TestRulesFileLoadErrors: a bad rules file fails `caddy validate` with the
// file and line.
func TestRulesFileLoadErrors(t *testing.T) {
	t.Parallel()
	needCaddy(t)
	dir := t.TempDir()
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", "rate_limit:\n  - path: /a\n    limit: 5\n    window: 1m\n    colour: red\n", `unknown field "colour", at RULES:5`},
		{"bad window", "rate_limit:\n  - path: /a\n    limit: 5\n    window: soon\n", `limit window "soon": not a duration (such as 500ms, 1m or 1d) or a calendar period (day, week, month or year), at RULES:3`},
		{"bad yaml", "rate_limit:\n  - path: /a\n\t limit: 5\n", "RULES: yaml: line 2: found a tab character that violates indentation"},
		{"missing", "", "rules_file: stat RULES: no such file or directory"},
	} {
		rules := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
		if c.yaml != "" {
			if err := os.WriteFile(rules, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		caddyfile := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(caddyfile, []byte(":8080 {\n\trate_limit {\n\t\trules_file "+rules+"\n\t}\n}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddyBin, "validate", "--config", caddyfile, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
		out, err := cmd.CombinedOutput()
		want := strings.ReplaceAll(c.want, "RULES", rules)
		if err == nil || !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), want) {
			t.Errorf("%s: caddy validate (error %v) said:\n%s\nwant it to contain %q", c.name, err, out, want)
		}
	}
}
