package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// dashboardOverridesCaddyfile is dashboardCaddyfile's admin set-up with
// one rule, api, 2 an hour keyed by the X-Key header, and the dashboard on
// the site twice: with write at /rl/, read-only at /view/.
const dashboardOverridesCaddyfile = `{
` + dashboardAdmin + `
}

:{{.HTTP}} {
	handle /rl/* {
		rate_limit_ui write {
			admin_address {{.Admin}}
		}
	}
	handle /view/* {
		rate_limit_ui
	}
	handle {
		rate_limit {
			name api
			limit 2 1h
			by header X-Key
		}
		respond "ok"
	}
}
`

// Keys the overrides test sets: one with a slash, a percent sign, a
// question mark, a space and non-ASCII letters, which must reach the
// admin API as one path segment, unchanged; and one that would be HTML.
const (
	oddKey  = "a/b%2F c?d=é✓"
	htmlKey = `<img src=x onerror="alert(1)">`
)

// setOverride fills the page's override form and sets it.
func (pg *page) setOverride(key, factor, expiresIn string) {
	pg.t.Helper()
	pg.waitFor("the override form shows", `!document.getElementById("override-form").hidden`)
	var actions []chromedp.Action[chromedp.Void]
	for _, f := range [][2]string{{"override-key", key}, {"override-factor", factor}, {"override-expires", expiresIn}} {
		// SetValue cannot set "": the field is emptied by script
		actions = append(actions, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%s).value = %s`, jsString(f[0]), jsString(f[1]))))
	}
	actions = append(actions, chromedp.Click(chromedp.ID("override-set")))
	pg.do("setting "+key+"'s override", actions...)
}

// overrideRow is the selector of key's row in the overrides' list (key a
// CSS string: its backslashes and quotes escaped).
func overrideRow(key string) string {
	return `#overrides tr[data-key="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"]`
}

// overrideKeys is a rule's overrides, as the admin API lists them: the
// keys and their factors, in its order.
func overrideKeys(t *testing.T, p *caddyProc, rule string) string {
	t.Helper()
	var v struct {
		Overrides []overrideAnswer `json:"overrides"`
	}
	p.adminJSON(t, "/rate_limit/rules/"+rule+"/overrides", &v)
	var keys []string
	for _, o := range v.Overrides {
		keys = append(keys, fmt.Sprintf("%s ×%v", o.Key, o.Factor))
	}
	return strings.Join(keys, ", ")
}

// TestDashboardOverrides drives a rule's overrides in Chromium: set from
// the admin endpoint's page (a key that is no plain word, ×2: it passes
// exactly 4 of limit 2; a key that would be HTML, ×0 for 24h: refused at
// once, shown as text), a bad value refused with the admin API's reason,
// one removed (asked first: the key is back at its limit); set and
// removed from a site's page with write, the key unchanged on its way
// through ?api=; listed without any control on a read-only site's page.
func TestDashboardOverrides(t *testing.T) {
	p := startCaddy(t, dashboardOverridesCaddyfile)
	pg := openDashboard(t, p, "")
	pg.showRule("api")
	pg.waitFor("no overrides yet", textIs("#overrides tbody", "no overrides")+" && "+textHas("#overrides-note", "0 of at most 10,000."))

	pg.setOverride(oddKey, "2", "")
	pg.waitFor("the page says it set it", textIs("#override-ok", "Override set: "+oddKey+" ×2, with no end."))
	pg.waitFor("the list shows it", textHas(overrideRow(oddKey), oddKey+"\t×2\tnever\t")+" && "+
		fmt.Sprintf(`/^127\.[0-9.]+:[0-9]+$/.test(document.querySelector(%s).innerText)`, jsString(overrideRow(oddKey)+` [data-field="set_by"]`)))
	if got := overrideKeys(t, p, "api"); got != oddKey+" ×2" {
		t.Errorf("the admin API's overrides: %q, want %q ×2", got, oddKey)
	}
	wantStatuses(t, "the odd key at ×2", p.statuses(t, 5, "/", "X-Key", oddKey), seq(4, 200, 1, 429))
	wantStatuses(t, "another key", p.statuses(t, 3, "/", "X-Key", "plain"), seq(2, 200, 1, 429))

	pg.setOverride(htmlKey, "0", "24h")
	pg.waitFor("the list shows the HTML key as text", textHas(overrideRow(htmlKey), htmlKey+"\t×0\tin 24 h 0 min\t"))
	pg.waitFor("sorted by key", `document.querySelector("#overrides tbody tr").dataset.key === `+jsString(htmlKey))
	wantStatuses(t, "the HTML key at ×0", p.statuses(t, 1, "/", "X-Key", htmlKey), seq(0, 200, 1, 429))

	// bad values: one the page refuses itself, one the admin API refuses
	pg.setOverride("plain", "-1", "")
	pg.waitFor("the page's own error", textHas("#override-error", "Factor: a number ≥ 0"))
	pg.setOverride("plain", "2", "0s")
	pg.waitFor("the admin API's reason", textIs("#override-error", `The override was not set: expires_in "0s": want a positive duration such as 30m, 24h or 7d`))
	if got := overrideKeys(t, p, "api"); got != htmlKey+" ×0, "+oddKey+" ×2" {
		t.Errorf("after refused values: %q", got)
	}

	// remove the odd key's: asked first; it has spent 4 of its 2 again
	pg.do("removing the odd key's override", chromedp.Click(chromedp.CSS(overrideRow(oddKey)+" button.remove")))
	pg.waitFor("the page says it removed it", textIs("#override-ok", "Override of "+oddKey+" removed."))
	pg.waitFor("the list no longer has it", `!document.querySelector(`+jsString(overrideRow(oddKey))+`)`)
	wantStatuses(t, "the odd key at the rule's limit", p.statuses(t, 1, "/", "X-Key", oddKey), seq(0, 200, 1, 429))
	pg.mu.Lock()
	if len(pg.dialogs) != 1 || !strings.Contains(pg.dialogs[0], oddKey) {
		t.Errorf("dialogs %q, want one confirmation naming the key (and no alert of the HTML key)", pg.dialogs)
	}
	pg.mu.Unlock()
	if n := pg.count("#overrides img"); n != 0 {
		t.Errorf("the HTML key made %d img elements", n)
	}

	// a site's page with write: the key travels as ?api=…/keys/KEY/override
	site := strings.TrimSuffix(p.url("/"), "/")
	rw := openPage(t, site, site+"/rl/", "", nil)
	rw.showRule("api")
	rw.waitFor("the site lists the override", textHas(overrideRow(htmlKey), "×0"))
	const siteKey = "z/%é?#&x=1"
	rw.setOverride(siteKey, "1.5", "90m")
	rw.waitFor("the site's page set it", textHas("#override-ok", "Override set: "+siteKey+" ×1.5 until "))
	if got := overrideKeys(t, p, "api"); got != htmlKey+" ×0, "+siteKey+" ×1.5" {
		t.Errorf("after the site's PUT: %q", got)
	}
	rw.waitFor("the site lists it", textHas(overrideRow(siteKey), "×1.5\tin 90 min\t"))
	rw.do("removing it from the site", chromedp.Click(chromedp.CSS(overrideRow(siteKey)+" button.remove")))
	rw.waitFor("the site's page removed it", textIs("#override-ok", "Override of "+siteKey+" removed."))
	if got := overrideKeys(t, p, "api"); got != htmlKey+" ×0" {
		t.Errorf("after the site's DELETE: %q", got)
	}

	// a read-only site's page: the list, no form, no Remove
	ro := openPage(t, site, site+"/view/", "", nil)
	ro.showRule("api")
	ro.waitFor("the read-only page lists the override", textHas(overrideRow(htmlKey), htmlKey+"\t×0\tin "))
	ro.waitFor("and says it is read-only", textHas("#overrides-note", "read-only"))
	if n := ro.count("#overrides button, #override-form:not([hidden]), #override-this"); n != 0 {
		t.Errorf("the read-only page shows %d controls that change overrides", n)
	}
}

// count is the number of elements matching a CSS selector.
func (pg *page) count(selector string) int {
	pg.t.Helper()
	n, err := chromedp.Run(pg.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(selector))))
	if err != nil {
		pg.t.Fatalf("counting %s: %v", selector, err)
	}
	return n
}
