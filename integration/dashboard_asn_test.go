package integration

import (
	"strings"
	"testing"
)

// dashboardASNCaddyfile is dashboardCaddyfile's admin set-up with an ASN
// database (ASN_DB) and a rule by address, api.
const dashboardASNCaddyfile = `{
` + dashboardAdmin + `
	rate_limit {
		asn_db ASN_DB
	}
}

:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit 5 1h
	}
	respond "ok"
}
`

// TestDashboardASN: with asn_db, a rule's busiest and most-denied keys
// show the network of each key the database places (AS15169 GOOGLE),
// empty for one it does not, and a key's state names its network. The
// column is absent where no key has one (TestDashboard's lists).
func TestDashboardASN(t *testing.T) {
	p := startCaddy(t, strings.ReplaceAll(dashboardASNCaddyfile, "ASN_DB", writeSystems(t, testSystems)))
	pg := openDashboard(t, p, "")
	wantStatuses(t, "8.8.8.8", p.statuses(t, 7, "/api/x", xff("8.8.8.8")...), seq(5, 200, 2, 429))
	wantStatuses(t, "3.5.1.1", p.statuses(t, 3, "/api/x", xff("3.5.1.1")...), seq(3, 200, 0, 0))
	wantStatuses(t, clientA, p.statuses(t, 1, "/api/x", xff(clientA)...), seq(1, 200, 0, 0))

	pg.showRule("api")
	pg.waitFor("busiest keys with their networks", textIs(`#top-requests`,
		"key\tnetwork\trequests\n8.8.8.8\tAS15169 GOOGLE\t7\n3.5.1.1\tAS16509 AMAZON-02\t3\n"+clientA+"\t\t1"))
	pg.waitFor("most denied with its network", textIs(`#top-denied`, "key\tnetwork\tdenied\n8.8.8.8\tAS15169 GOOGLE\t2"))
	pg.lookUp("3.5.1.1")
	pg.waitFor("the key's state names its network", textHas(`#key-state [data-field="key-summary"]`, "Network AS16509 (AMAZON-02)."))
	pg.lookUp(clientA)
	if got := pg.text(`#key-state [data-field="key-summary"]`); strings.Contains(got, "Network") {
		t.Errorf("a key in no network: %q names one", got)
	}
}
