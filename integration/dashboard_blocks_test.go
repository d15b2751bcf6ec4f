package integration

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// dashboardBlocksCaddyfile is dashboardCaddyfile's admin set-up with one
// rule, login, that blocks a key for an hour after a denial.
const dashboardBlocksCaddyfile = `{
` + dashboardAdmin + `
}

:{{.HTTP}} {
	rate_limit /login {
		name login
		limit 2 1m
		block_for 1h
	}
	respond "ok"
}
`

// TestDashboardBlocks: a rule with block_for lists its blocked keys on
// its page, with their offences, and the page lifts a block: after the
// lift the key has its 2 again, and its next denial blocks it anew.
func TestDashboardBlocks(t *testing.T) {
	p := startCaddy(t, dashboardBlocksCaddyfile)
	pg := openDashboard(t, p, "")
	wantStatuses(t, "A", p.statuses(t, 3, "/login", xff(clientA)...), seq(2, 200, 1, 429))

	pg.showRule("login")
	pg.waitFor("the rule's facts say it blocks", textHas(`#rule-facts [data-field="blocks"]`, "1h after a denial"))
	row := `#blocked tr[data-key="` + clientA + `"]`
	pg.waitFor("A is listed as blocked, offence 1", textHas(row, clientA+"\t1\t"))
	pg.lookUp(clientA)
	pg.waitFor("A's state says blocked", textHas(`#key-state [data-field="key-summary"]`, "Blocked until")+" && "+textHas(`#key-state [data-field="key-summary"]`, "(offence 1)"))

	pg.do("lifting A's block", chromedp.Click(chromedp.CSS(row+" button.lift")))
	pg.waitFor("the page says the block was lifted", textHas("#key-state", "Block lifted."))
	pg.waitFor("no key is blocked", textIs(`#blocked tbody`, "no key is blocked"))
	pg.mu.Lock()
	if n := len(pg.dialogs); n != 1 {
		t.Errorf("%d confirmations asked, want 1", n)
	}
	pg.mu.Unlock()
	wantStatuses(t, "A after the lift", p.statuses(t, 3, "/login", xff(clientA)...), seq(2, 200, 1, 429))
	pg.waitFor("A is blocked again", textHas(row, clientA+"\t1\t"))
	pg.check()
}
