package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// overridesCaddyfile is one rule, api, limit 5 1m keyed by X-User, with
// extra among its subdirectives; the dashboard, read-only, at /rl.
func overridesCaddyfile(extra string) string {
	return `{
	{{.Global}}
}
http://127.0.0.1:{{.HTTP}} {
	handle /rl {
		rate_limit_ui
	}
	handle {
		rate_limit {
			name api
			limit 5 1m
			by header X-User
			` + extra + `
		}
		respond "ok"
	}
}
`
}

// overrideAnswer is an override as the admin API answers it.
type overrideAnswer struct {
	Key     string  `json:"key"`
	Factor  float64 `json:"factor"`
	Expires string  `json:"expires"`
	SetAt   string  `json:"set_at"`
	SetBy   string  `json:"set_by"`
}

// setOverride PUTs key's override of rule api with body, wants 200, and
// returns the answer.
func (p *caddyProc) setOverride(t *testing.T, key, body string) overrideAnswer {
	t.Helper()
	code, got := p.admin(t, http.MethodPut, "/rate_limit/rules/api/keys/"+key+"/override", body)
	if code != http.StatusOK {
		t.Fatalf("PUT %s's override %s: %d %s", key, body, code, got)
	}
	var o overrideAnswer
	if err := json.Unmarshal([]byte(got), &o); err != nil {
		t.Fatalf("PUT %s's override: %v in %s", key, err, got)
	}
	return o
}

// as is the header of client key.
func as(key string) []string { return []string{"X-User", key} }

// TestOverrides is the issue's, on one Caddy: a key at factor 2 of limit 5
// 1m passes exactly 10, then 429; a key at 0 is refused at once and
// passes after DELETE; each change is one log line; bad input is a 400
// with the reason, max_overrides a 409; the read-only dashboard lists
// them and refuses a PUT; a reload keeps them, and so does a restart.
func TestOverrides(t *testing.T) {
	t.Parallel()
	cf := overridesCaddyfile("max_overrides 4")
	p := startCaddy(t, cf)

	o := p.setOverride(t, "alice", `{"factor": 2, "expires_in": "24h"}`)
	if o.Key != "alice" || o.Factor != 2 || o.Expires == "" || !strings.HasSuffix(o.SetAt, "Z") || !strings.HasPrefix(o.SetBy, "127.0.0.1:") {
		t.Errorf("PUT answered %+v", o)
	}
	wantStatuses(t, "alice at factor 2", p.statuses(t, 11, "/", as("alice")...), seq(10, 200, 1, 429))
	wantStatuses(t, "bob, no override", p.statuses(t, 6, "/", as("bob")...), seq(5, 200, 1, 429))
	line := p.waitLog(`"logger":"rate_limit"`, `"msg":"rate limit override set"`, `"rule":"api"`, `"key":"alice"`, `"factor":2`, `"who":"127.0.0.1:`, `"what":"set"`, `"expires":"20`)
	if line == "" {
		t.Errorf("no override log line for alice:\n%s", p.log())
	}

	p.setOverride(t, "zed", `{"factor": 0}`)
	code, h, _ := p.get(t, "/", as("zed")...)
	if code != 429 || h.Get("Retry-After") != "60" {
		t.Errorf("zed at factor 0: %d, Retry-After %q; want 429 at once, 60", code, h.Get("Retry-After"))
	}
	if code, body := p.admin(t, http.MethodDelete, "/rate_limit/rules/api/keys/zed/override", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE zed's override: %d %s", code, body)
	}
	if code := p.status(t, "/", as("zed")...); code != 200 {
		t.Errorf("zed after DELETE: %d, want 200", code)
	}
	if p.waitLog(`"msg":"rate limit override removed"`, `"key":"zed"`, `"factor":0`, `"what":"removed"`) == "" {
		t.Errorf("no removal log line:\n%s", p.log())
	}
	if code, body := p.admin(t, http.MethodDelete, "/rate_limit/rules/api/keys/zed/override", ""); code != http.StatusNotFound || !strings.Contains(body, `no override for key \"zed\"`) {
		t.Errorf("DELETE without an override: %d %s", code, body)
	}

	for _, c := range []struct {
		path, body string
		code       int
		reason     string
	}{
		{"rules/nope/keys/k/override", `{"factor": 2}`, 404, `no rule named \"nope\"`},
		{"rules/api/keys/k/override", `{"factor": -1}`, 400, "factor -1: must be a finite number ≥ 0"},
		{"rules/api/keys/k/override", `{}`, 400, "factor is required"},
		{"rules/api/keys/k/override", `{"factor": "NaN"}`, 400, "body: json: cannot unmarshal string"},
		{"rules/api/keys/k/override", `{"factor": 2, "expires_in": "soon"}`, 400, `expires_in \"soon\": want a positive duration`},
		{"rules/api/keys/k/override", `{"factor": 2, "expires_in": "-1h"}`, 400, `expires_in \"-1h\": want a positive duration`},
		{"rules/api/keys/k/override", `{"factor": 2`, 400, "body: unexpected EOF"},
		{"rules/api/keys/k/override", `{"factor": 2, "until": "x"}`, 400, `unknown field \"until\"`},
		{"rules/api/keys/" + strings.Repeat("k", 1025) + "/override", `{"factor": 2}`, 400, `key of 1025 bytes: rule \"api\" keeps keys of at most 1024 bytes`},
	} {
		code, body := p.admin(t, http.MethodPut, "/rate_limit/"+c.path, c.body)
		if code != c.code || !strings.Contains(body, c.reason) {
			t.Errorf("PUT %.40s %s: %d %s, want %d with %q", c.path, c.body, code, body, c.code, c.reason)
		}
	}
	p.setOverride(t, "carol", `{"factor": 3}`)
	p.setOverride(t, "dave", `{"factor": 0.4}`)
	p.setOverride(t, "erin", `{"factor": 1}`) // the 4th: alice, carol, dave, erin
	if code, body := p.admin(t, http.MethodPut, "/rate_limit/rules/api/keys/frank/override", `{"factor": 2}`); code != http.StatusConflict || !strings.Contains(body, "max_overrides reached (4)") {
		t.Errorf("a 5th override past max_overrides 4: %d %s, want 409", code, body)
	}
	p.setOverride(t, "erin", `{"factor": 5}`) // a key held is replaced

	// the read-only dashboard lists them and refuses a change
	code, _, body := p.get(t, "/rl?api=rules/api/overrides")
	var list struct {
		Rule         string           `json:"rule"`
		MaxOverrides int              `json:"max_overrides"`
		Overrides    []overrideAnswer `json:"overrides"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("dashboard's overrides: %d %v %s", code, err, body)
	}
	var keys []string
	for _, o := range list.Overrides {
		keys = append(keys, o.Key)
	}
	if list.Rule != "api" || list.MaxOverrides != 4 || strings.Join(keys, " ") != "alice carol dave erin" || list.Overrides[3].Factor != 5 {
		t.Errorf("overrides listed: %s", body)
	}
	req, _ := http.NewRequest(http.MethodPut, p.url("/rl?api=rules/api/keys/frank/override"), strings.NewReader(`{"factor": 2}`))
	if resp, err := p.send(t, req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT through a read-only dashboard: %v %v, want 403", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	// a reload (max_overrides changed) keeps every override: carol passes 15
	cf = overridesCaddyfile("max_overrides 5")
	p.reload(t, cf)
	wantStatuses(t, "carol at factor 3 after a reload", p.statuses(t, 16, "/", as("carol")...), seq(15, 200, 1, 429))
	p.setOverride(t, "frank", `{"factor": 2}`) // the 5th, under the new bound

	// a graceful restart keeps them: dave passes 2 (5 × 0.4), frank 10
	p = p.restart(t, cf, false)
	wantStatuses(t, "dave at factor 0.4 after a restart", p.statuses(t, 3, "/", as("dave")...), seq(2, 200, 1, 429))
	wantStatuses(t, "frank at factor 2 after a restart", p.statuses(t, 11, "/", as("frank")...), seq(10, 200, 1, 429))
	if p.waitLog(`"msg":"rate limit overrides restored"`, `"rule":"api"`, `"overrides":`) == "" {
		t.Errorf("no restore line:\n%s", p.log())
	}
}

// overridesList GETs rule api's overrides.
func (p *caddyProc) overridesList(t *testing.T) []overrideAnswer {
	t.Helper()
	var v struct {
		Overrides []overrideAnswer `json:"overrides"`
	}
	p.adminJSON(t, "/rate_limit/rules/api/overrides", &v)
	return v.Overrides
}

// TestOverridesCluster: an override set on one node is in force on the
// other when the PUT answers (a key at factor 0 refused at its first
// request there), listed there with who set it, and a DELETE on the other
// node lifts it on both.
func TestOverridesCluster(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 2, caddyOf(t, nodeGlobal+`
http://127.0.0.1:{{.HTTP}} {
	rate_limit {
		name api
		limit 5 1m
		by header X-User
	}
	respond "ok"
}
`))
	a, b := nodes[0], nodes[1]
	set := a.setOverride(t, "zed", `{"factor": 0}`)
	if code := b.status(t, "/", as("zed")...); code != 429 {
		t.Errorf("zed at factor 0 set on node 1, at node 2: %d, want 429 at once", code)
	}
	if got := b.overridesList(t); len(got) != 1 || got[0] != set {
		t.Errorf("node 2 lists %+v, want %+v", got, set)
	}
	if code, body := b.admin(t, http.MethodDelete, "/rate_limit/rules/api/keys/zed/override", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE on node 2: %d %s", code, body)
	}
	if code := a.status(t, "/", as("zed")...); code != 200 {
		t.Errorf("zed at node 1 after DELETE on node 2: %d, want 200", code)
	}
	if got := a.overridesList(t); len(got) != 0 {
		t.Errorf("node 1 lists %+v after the DELETE", got)
	}
}
