package integration

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"
)

// dashboardOnSite mounts the dashboard on the site, behind basic_auth,
// twice: with write at /rate-limits/, read-only at /view/; Caddy's admin
// endpoint keeps its default settings (no origins, no empty origin).
const dashboardOnSite = `{
	{{.Global}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}
}

:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit 5 1h
		algorithm sliding_log
	}
	handle /rate-limits/* {
		basic_auth {
			ops HASH
		}
		rate_limit_ui write {
			admin_address {{.Admin}}
		}
	}
	handle /view/* {
		basic_auth {
			ops HASH
		}
		rate_limit_ui
	}
	respond "ok"
}
`

// TestDashboardOnSite opens the dashboard of rate_limit_ui by its URL, as
// one typed in the address bar, behind basic_auth: it shows the rule and
// its traffic, resets a key and changes the limit with write (the counters
// kept), and refuses the reset without write.
func TestDashboardOnSite(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, strings.ReplaceAll(dashboardOnSite, "HASH", string(hash)))
	if code, _, _ := p.get(t, "/rate-limits/"); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	auth := map[string]any{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))}
	origin := "http://" + strings.TrimPrefix(strings.TrimSuffix(p.url("/"), "/"), "http://")
	pg := openPage(t, origin, origin+"/rate-limits/", "", auth)
	pg.waitFor("the overview shows rule api", textIs(`[data-rule="api"] [data-field="limits"]`, "5 / 1h"))

	wantStatuses(t, "A", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	pg.waitFor("the overview counts the denial", textIs(`[data-rule="api"] [data-field="denied"]`, "1"))
	pg.showRule("api")
	pg.lookUp(clientA)
	pg.waitFor("A has used its 5", textIs(`#key-state [data-field="remaining"]`, "0"))

	// with write: a reset
	pg.reset(clientA)
	pg.waitFor("A shows 5 remaining", textIs(`#key-state [data-field="remaining"]`, "5"))
	wantStatuses(t, "A after the reset", p.statuses(t, 2, "/api/x", xff(clientA)...), seq(2, 200, 0, 0))

	// with write: limit 7, through /config/: A keeps its 2 used
	pg.edit("7", "", "")
	pg.waitFor("the page says it saved", textHas("#form-ok", "Saved"))
	p.client.CloseIdleConnections()
	p.reloaded = true
	wantStatuses(t, "A at limit 7", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))

	// read-only: the page shows the rule, the reset is refused
	ro := openPage(t, origin, origin+"/view/", "", auth)
	ro.showRule("api")
	ro.lookUp(clientA)
	ro.waitFor("A has used its 7", textIs(`#key-state [data-field="remaining"]`, "0"))
	ro.do("resetting key "+clientA, chromedp.Click(chromedp.ID("reset")))
	ro.waitFor("the page says the reset was refused", textHas("#key-state", "read-only"))
	ro.waitFor("the edit form says the config is not shown", textHas("#edit-note", "read-only"))
	if code := p.status(t, "/api/x", xff(clientA)...); code != 429 {
		t.Errorf("A after a refused reset: %d, want 429", code)
	}
	code, _, body := p.get(t, "/view/?api=rules/api/keys/"+clientA, "Authorization", auth["Authorization"].(string))
	if code != 200 || !strings.Contains(body, `"rule": "api"`) {
		t.Errorf("read-only API: %d %.100q, want 200 and the key's state", code, body)
	}
}

// TestExampleDashboardSite: the example's dashboard asks for the site's
// credentials, serves the page and its API with them, and, read-only,
// refuses a reset.
func TestExampleDashboardSite(t *testing.T) {
	t.Parallel()
	p := startExample(t, "dashboard_site.Caddyfile")
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:change-me"))
	if code, _, _ := p.get(t, "/rate-limits/"); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	if code, _, body := p.get(t, "/rate-limits/", "Authorization", auth); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("with credentials: %d, want 200 and the page", code)
	}
	wantStatuses(t, "the rule", p.statuses(t, 6, "/api/x"), seq(5, 200, 1, 429))
	code, _, body := p.get(t, "/rate-limits/?api=rules/api", "Authorization", auth)
	if code != http.StatusOK || !strings.Contains(body, `"name": "api"`) {
		t.Errorf("the rule through the page's API: %d %s", code, body)
	}
	req, err := http.NewRequest(http.MethodDelete, p.url("/rate-limits/?api=rules/api/keys/127.0.0.1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Host = p.host // the example's site is localhost
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reset without write: %d, want 403", resp.StatusCode)
	}
}

// TestDashboardSiteForeignWrites: a page of another site, opened in the
// browser of an operator logged in to the dashboard, sends the reset with
// the operator's credentials. Refused (403, the key still spent) when the
// browser says it is cross-site or same-site (Sec-Fetch-Site) or names
// another origin; the dashboard's own page's reset, and one from a client
// that is not a browser, pass.
func TestDashboardSiteForeignWrites(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, strings.ReplaceAll(dashboardOnSite, "HASH", string(hash)))
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))
	own := strings.TrimSuffix(p.url("/"), "/")
	reset := func(headers ...string) int {
		req, err := http.NewRequest(http.MethodDelete, p.url("/rate-limits/?api=rules/api/keys/"+clientA), nil)
		if err != nil {
			t.Fatal(err)
		}
		addHeaders(req, append([]string{"Authorization", auth}, headers...))
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wantStatuses(t, "A spends its 5", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", "http://other.localhost"},
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
	} {
		if code := reset(h...); code != http.StatusForbidden {
			t.Errorf("a reset with %q: %d, want 403", h, code)
		}
		if code := p.status(t, "/api/x", xff(clientA)...); code != 429 {
			t.Fatalf("A after a reset with %q: %d, want 429 (not reset)", h, code)
		}
	}
	if code := reset("Sec-Fetch-Site", "same-origin", "Origin", own); code != http.StatusOK {
		t.Errorf("the page's own reset: %d, want 200", code)
	}
	wantStatuses(t, "A after its reset", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	if code := reset(); code != http.StatusOK {
		t.Errorf("a reset without Sec-Fetch-Site or Origin (curl): %d, want 200", code)
	}
}
