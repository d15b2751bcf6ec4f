package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/edgebyte/edgelimit/internal/debpkg"
)

// chromium is the browser the dashboard test drives, found or installed
// once per test run.
var chromium struct {
	once sync.Once
	path string
	err  error
}

// chromiumNames are the names Debian's and others' Chromium go by.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findChromium is the path of a Chromium on PATH, or "".
func findChromium() string {
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needChromium returns a Chromium to drive, installing Debian's chromium
// package when there is none (as root, or through sudo -n), and skips t,
// saying why, where it cannot be installed.
func needChromium(t *testing.T) string {
	t.Helper()
	chromium.once.Do(func() {
		if chromium.path = findChromium(); chromium.path != "" {
			return
		}
		t.Logf("no Chromium on PATH: installing Debian's chromium package")
		begin := time.Now()
		chromium.err = debpkg.Install("chromium", "fonts-liberation")
		chromium.path = findChromium()
		if chromium.err == nil && chromium.path == "" {
			chromium.err = fmt.Errorf("apt-get installed chromium, but no %s is on PATH", strings.Join(chromiumNames, ", "))
		}
		t.Logf("installing chromium took %v", time.Since(begin).Round(time.Second))
	})
	if chromium.path == "" {
		t.Skipf("skipping: no Chromium, and it could not be installed: %v", chromium.err)
	}
	return chromium.path
}

// newBrowser starts a headless Chromium, ended when t ends, with a fresh
// profile and the flags that keep it off the network but for the pages
// it is sent to, and returns a tab's context.
func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	path := needChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
	}
	// Starting the browser is not what is tested: on two busy cores it
	// once failed to start ("chrome failed to start") and started on a
	// second try, so it gets three.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		fresh := append(opts[:len(opts):len(opts)], chromedp.UserDataDir(t.TempDir()))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), fresh...)
		ctx, cancel := chromedp.NewContext(allocCtx)
		if err = chromedp.Do(ctx); err == nil { // starts the browser
			t.Cleanup(func() {
				cancel()
				cancelAlloc()
			})
			return ctx
		}
		cancel()
		cancelAlloc()
		t.Logf("starting %s, attempt %d: %v", path, attempt, err)
	}
	t.Fatalf("starting %s: %v", path, err)
	return nil
}

// page is a dashboard open in a browser tab: the tab, and what it has
// asked for and thrown so far.
type page struct {
	t      *testing.T
	ctx    context.Context
	origin string // http://host:port of the admin endpoint

	mu         sync.Mutex
	requests   []string // URLs the tab requested
	exceptions []string // uncaught JavaScript exceptions
	dialogs    []string // messages of the dialogs it opened, each accepted
}

// openDashboard opens a browser tab, then the dashboard of p's admin
// endpoint in it; referrer, if set, is sent as a link from it would.
func openDashboard(t *testing.T, p *caddyProc, referrer string) *page {
	t.Helper()
	origin := "http://" + p.data.Admin
	return openPage(t, origin, origin+"/rate_limit/ui/", referrer, nil)
}

// openPage opens a browser tab that sends headers with every request,
// then the dashboard at url, served from origin.
func openPage(t *testing.T, origin, url, referrer string, headers map[string]any) *page {
	t.Helper()
	pg := &page{t: t, ctx: newBrowser(t, 1280, 800), origin: origin}
	if headers != nil {
		if _, err := chromedp.Call(pg.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: headers}); err != nil {
			t.Fatal(err)
		}
	}
	err := chromedp.Listen(pg.ctx, func(ev any) {
		pg.mu.Lock()
		defer pg.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			pg.requests = append(pg.requests, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := fmt.Sprintf("%s:%d:%d %s", d.URL, d.LineNumber+1, d.ColumnNumber+1, d.Text)
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			pg.exceptions = append(pg.exceptions, msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A confirm() blocks the page, and so the click that opened it: a
	// goroutine answers each dialog (Reset asks before it resets).
	dialogs := chromedp.Events(pg.ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			pg.mu.Lock()
			pg.dialogs = append(pg.dialogs, ev.Message)
			pg.mu.Unlock()
			chromedp.Call(pg.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	t.Cleanup(pg.check)
	res, err := chromedp.Call(pg.ctx, cdppage.Navigate, cdppage.NavigateParams{URL: url, Referrer: referrer})
	if err != nil || res.ErrorText != "" {
		t.Fatalf("navigating to %s: %v %s", url, err, res.ErrorText)
	}
	pg.do("waiting for the page", chromedp.WaitReady(chromedp.ID("status"))) // the new document's
	pg.waitFor("the page polls the admin API", `document.getElementById("status").textContent.startsWith("live")`)
	return pg
}

// check fails the test if the page threw, or asked any host but the
// admin endpoint for anything.
func (pg *page) check() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for _, e := range pg.exceptions {
		pg.t.Errorf("the page threw: %s", e)
	}
	for _, u := range pg.requests {
		if !strings.HasPrefix(u, pg.origin+"/") && !strings.HasPrefix(u, "data:") {
			pg.t.Errorf("the page requested %s: not its admin endpoint", u)
		}
	}
}

// waitFor polls a JavaScript condition in the page every 50 ms until it
// holds, for up to 10 s.
func (pg *page) waitFor(what, cond string) {
	pg.t.Helper()
	ctx, cancel := context.WithTimeout(pg.ctx, 15*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond,
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		pg.t.Fatalf("waiting until %s (%s): %v\npage text:\n%s", what, cond, err, pg.text("body"))
	}
}

// text is the text of the first element matching a CSS selector; "" if
// none does.
func (pg *page) text(selector string) string {
	pg.t.Helper()
	v, err := chromedp.Run(pg.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {}).innerText || ""`, jsString(selector))))
	if err != nil {
		pg.t.Fatalf("reading %s: %v", selector, err)
	}
	return v
}

// do runs browser actions, failing the test on an error.
func (pg *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	pg.t.Helper()
	ctx, cancel := context.WithTimeout(pg.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		pg.t.Fatalf("%s: %v\npage text:\n%s", what, err, pg.text("body"))
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// textIs is a condition: the text (as shown: cells apart by tabs, rows by
// newlines) of the element matching selector is want.
func textIs(selector, want string) string {
	return fmt.Sprintf(`((document.querySelector(%s) || {}).innerText || "").trim() === %s`, jsString(selector), jsString(want))
}

// textHas is a condition: the text of the element matching selector
// contains part.
func textHas(selector, part string) string {
	return fmt.Sprintf(`((document.querySelector(%s) || {}).innerText || "").includes(%s)`, jsString(selector), jsString(part))
}

// showRule opens a rule's page by its link on the overview.
func (pg *page) showRule(rule string) {
	pg.t.Helper()
	pg.do("going back to the overview", chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`))
	link := fmt.Sprintf(`[data-rule=%s] h2 a`, jsString(rule))
	pg.waitFor("the overview lists rule "+rule, fmt.Sprintf(`!!document.querySelector(%s)`, jsString(link)))
	pg.do("opening the rule's page", chromedp.Click(chromedp.CSS(link)))
	pg.waitFor("the rule's page shows", textIs("#rule-name", rule))
}

// lookUp shows a key's state with the page's key search.
func (pg *page) lookUp(key string) {
	pg.t.Helper()
	pg.do("searching for key "+key,
		chromedp.SetValue(chromedp.ID("key-input"), key),
		chromedp.Click(chromedp.CSS(`#key-form button`)))
	pg.waitFor("the key's state shows", textHas(`#key-state [data-field="key-summary"]`, key))
}

// reset presses the key's Reset button and accepts the confirmation; it
// returns the confirmation's message.
func (pg *page) reset(key string) string {
	pg.t.Helper()
	pg.mu.Lock()
	before := len(pg.dialogs)
	pg.mu.Unlock()
	pg.do("resetting key "+key, chromedp.Click(chromedp.ID("reset")))
	pg.waitFor("the page says the key was reset", textHas("#key-state", "Key reset."))
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if len(pg.dialogs) != before+1 {
		pg.t.Fatalf("reset: %d confirmations asked, want 1", len(pg.dialogs)-before)
	}
	return pg.dialogs[before]
}

// edit fills the rule's edit form (the first limit's count and window,
// the burst; "" leaves a field alone) and saves it.
func (pg *page) edit(count, window, burst string) {
	pg.t.Helper()
	pg.waitFor("the edit form shows", `!document.getElementById("edit-form").hidden && !!document.getElementById("count-0")`)
	var actions []chromedp.Action[chromedp.Void]
	for id, v := range map[string]string{"count-0": count, "window-0": window, "burst-input": burst} {
		if v != "" {
			actions = append(actions, chromedp.SetValue(chromedp.ID(id), v))
		}
	}
	actions = append(actions, chromedp.Click(chromedp.ID("save")))
	pg.do("saving the form", actions...)
}

// screenshot saves the viewport (or the whole page) as docs/NAME.
func (pg *page) screenshot(name string, whole bool) {
	pg.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if whole {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(pg.ctx, shot)
	if err != nil {
		pg.t.Fatalf("screenshot %s: %v", name, err)
	}
	root, err := moduleRoot()
	if err != nil {
		pg.t.Fatal(err)
	}
	file := filepath.Join(root, "docs", name)
	if err := os.WriteFile(file, png, 0o644); err != nil {
		pg.t.Fatal(err)
	}
	pg.t.Logf("wrote %s", file)
}

// overflows reports whether the page is wider than its viewport.
func (pg *page) overflows() bool {
	pg.t.Helper()
	wide, err := chromedp.Run(pg.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil {
		pg.t.Fatal(err)
	}
	return wide
}

// dashboardSite has the rule the dashboard tests drive, api (5 an hour per
// client address, set with X-Forwarded-For), and two more for the
// overview: login (two limits, a burst, geo multipliers) and search
// (shadow, token bucket).
const dashboardSite = `
:{{.HTTP}} {
	rate_limit /api/* {
		name api
		limit 5 1h
	}
	rate_limit /login/* {
		name login
		limit 10 1m
		limit 200 1d
		burst 4
		geo_multiplier US 2 default 1
	}
	rate_limit /search/* {
		name search
		limit 20 1m
		algorithm token_bucket
		shadow
	}
	respond "ok"
}
`

// dashboardCaddyfile is dashboardSite with the admin endpoint set up for a
// browser as docs/dashboard.md says: its own address, and the empty origin
// of a navigation typed in the address bar; with enforce_origin, the
// strictest setting.
const dashboardCaddyfile = `{
` + dashboardAdmin + `
	rate_limit {
		geo_header CF-IPCountry
	}
}
` + dashboardSite

// dashboardAdmin is the global options of dashboardCaddyfile but its
// rate_limit block.
const dashboardAdmin = `	admin {{.Admin}} {
		origins {{.Admin}} ""
		enforce_origin
	}
	auto_https off
	persist_config off
	storage file_system {{.Storage}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}`

// dashboardDefaultCaddyfile is dashboardSite under Caddy's default admin
// settings.
const dashboardDefaultCaddyfile = `{
	{{.Global}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}
	rate_limit {
		geo_header CF-IPCountry
	}
}
` + dashboardSite

// TestDashboard drives the dashboard in a real Chromium against a real
// Caddy: the denied count rises with traffic, a key reset from the page
// clears the key, and a limit changed in the page's form is the one the
// next requests meet, counters kept; a bad value is refused beside its
// field. The page asks no other host and throws nothing. With
// EDGELIMIT_SCREENSHOTS=1 it also writes docs/dashboard-*.png.
func TestDashboard(t *testing.T) {
	p := startCaddy(t, dashboardCaddyfile)
	pg := openDashboard(t, p, "")
	begin := time.Now()
	shots := os.Getenv("EDGELIMIT_SCREENSHOTS") == "1"
	if shots {
		stop := backgroundTraffic(p, 90*time.Second)
		defer stop()
	}
	pg.waitFor("the overview shows rule api", textIs(`[data-rule="api"] [data-field="limits"]`, "5 / 1h"))

	// Traffic: A 8 requests (5 pass), B 2.
	wantStatuses(t, "A", p.statuses(t, 8, "/api/x", xff(clientA)...), seq(5, 200, 3, 429))
	wantStatuses(t, "B", p.statuses(t, 2, "/api/x", xff(clientB)...), seq(2, 200, 0, 0))
	pg.waitFor("the overview counts 3 denials", textIs(`[data-rule="api"] [data-field="denied"]`, "3"))
	if got := pg.text(`[data-rule="api"] [data-field="allowed"]`); got != "7" {
		t.Errorf("overview: allowed %q, want 7", got)
	}
	t.Logf("%v: the overview shows the denials", time.Since(begin).Round(time.Millisecond))

	// The rule's page: its heaviest keys, and A's state.
	pg.showRule("api")
	pg.waitFor("busiest keys: A 8, B 2", textIs(`#top-requests tbody`, clientA+"\t8\n"+clientB+"\t2"))
	pg.waitFor("most denied: A 3", textIs(`#top-denied tbody`, clientA+"\t3"))
	pg.lookUp(clientA)
	pg.waitFor("A has used its 5", textIs(`#key-state [data-field="used"]`, "5")+" && "+textIs(`#key-state [data-field="remaining"]`, "0"))

	// Reset A from the page: it has its 5 again.
	msg := pg.reset(clientA)
	if !strings.Contains(msg, clientA) || !strings.Contains(msg, "api") {
		t.Errorf("the confirmation %q does not name the key and the rule", msg)
	}
	pg.waitFor("A shows no state, 5 remaining", textIs(`#key-state [data-field="remaining"]`, "5")+" && "+
		textHas(`#key-state [data-field="key-summary"]`, "no state"))
	wantStatuses(t, "A after the reset", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	t.Logf("%v: a key reset from the page", time.Since(begin).Round(time.Millisecond))

	// A bad value: Caddy refuses it, and the page says so beside the field;
	// a malformed one the page refuses itself.
	pg.edit("0", "", "")
	pg.waitFor("Caddy's error shows beside the limit", textHas("#count-0-error", "limit 0: must be between 1 and"))
	pg.edit("5", "an hour", "")
	pg.waitFor("the page's own error shows beside the window", textHas("#window-0-error", "a duration"))
	var r adminRule
	p.adminJSON(t, "/rate_limit/rules/api", &r)
	if r.Limits[0].Count != 5 {
		t.Fatalf("after refused edits: limit %d in force, want 5", r.Limits[0].Count)
	}

	// Limit 8 from the page: A (5 used since the reset) has 3 more, B (2
	// used) 6 more: the counters were kept.
	pg.edit("8", "1h", "")
	pg.waitFor("the page says it saved", textHas("#form-ok", "Saved"))
	p.client.CloseIdleConnections() // the config was reloaded
	p.reloaded = true
	if got := pg.text("#snippet-caddyfile"); !strings.Contains(got, "\tlimit 8 1h\n") || strings.Contains(got, "burst") {
		t.Errorf("Caddyfile snippet:\n%s\nwant the line limit 8 1h, and no burst", got)
	}
	if got := pg.text("#snippet-json"); !strings.Contains(got, `"count": 8,`) || !strings.Contains(got, `"window": "1h"`) {
		t.Errorf("JSON snippet:\n%s\nwant count 8, window 1h", got)
	}
	wantStatuses(t, "A at limit 8", p.statuses(t, 4, "/api/x", xff(clientA)...), seq(3, 200, 1, 429))
	wantStatuses(t, "B at limit 8", p.statuses(t, 7, "/api/x", xff(clientB)...), seq(6, 200, 1, 429))
	pg.waitFor("the page shows limit 8", textIs(`#rule-facts [data-field="limits"]`, "8 / 1h"))
	t.Logf("%v: a limit changed from the page", time.Since(begin).Round(time.Millisecond))

	// A phone: nothing wider than the screen.
	pg.do("a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if pg.overflows() {
		t.Errorf("the rule's page is wider than a 390 px phone")
	}
	pg.do("the overview", chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`))
	pg.waitFor("the overview shows", `!document.getElementById("overview").hidden`)
	if pg.overflows() {
		t.Errorf("the overview is wider than a 390 px phone")
	}
	pg.do("back to 1280×800", chromedp.EmulateViewport(1280, 800))

	if shots {
		takeScreenshots(t, pg)
	}
}

// takeScreenshots writes docs/dashboard.md's pictures: the overview, and
// the page of rule login with a key looked up, once the background traffic
// has drawn a minute of charts.
func takeScreenshots(t *testing.T, pg *page) {
	t.Helper()
	pg.do("the overview", chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`))
	ctx, cancel := context.WithTimeout(pg.ctx, 2*time.Minute)
	defer cancel()
	// a minute of history in the charts; the poll's own timeout is the bound
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(window.__shotStart ||= Date.now()) < Date.now() - 60000`,
		chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(time.Second))); err != nil {
		t.Fatalf("waiting for a minute of traffic: %v", err)
	}
	pg.screenshot("dashboard-overview.png", false)
	pg.showRule("login")
	pg.lookUp("198.51.100.20")
	pg.edit("", "", "6")
	pg.waitFor("the page says it saved", textHas("#form-ok", "Saved"))
	pg.screenshot("dashboard-rule.png", true)
}

// backgroundTraffic sends requests to login and search from a few
// clients, at rates that rise and fall, until d has passed or the
// returned func is called.
func backgroundTraffic(p *caddyProc, d time.Duration) (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// login: 5 clients, a burst every ~20 s; search: steady
			if phase := (i / 100) % 4; phase == 1 || i%4 == 0 {
				ip := fmt.Sprintf("198.51.100.%d", 20+i%5)
				p.rawGet(ctx, "/login/x", append(xff(ip), "CF-IPCountry", []string{"US", "DE"}[i%2])...)
			}
			if i%3 == 0 {
				p.rawGet(ctx, "/search/x", xff(fmt.Sprintf("203.0.113.%d", 1+i%3))...)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// TestDashboardDefaultAdmin: under Caddy's default admin settings a
// browser's own navigation to the admin endpoint is refused (it carries
// neither Origin nor Referer, and Caddy checks them on every request with
// Sec-Fetch-Mode); docs/dashboard.md says how to allow it. A navigation
// that carries the endpoint's own address as Referer, as a link from it
// would, passes: through one, this test checks that the page's own
// requests — reads, the DELETE of a reset, the PATCH of an edit — pass
// Caddy's checks under the defaults.
func TestDashboardDefaultAdmin(t *testing.T) {
	p := startCaddy(t, dashboardDefaultCaddyfile)
	url := "http://" + p.data.Admin + "/rate_limit/ui/"
	pg := openDashboard(t, p, url)
	wantStatuses(t, "A", p.statuses(t, 6, "/api/x", xff(clientA)...), seq(5, 200, 1, 429))
	pg.showRule("api")
	pg.lookUp(clientA)
	pg.reset(clientA)
	pg.waitFor("A shows 5 remaining", textIs(`#key-state [data-field="remaining"]`, "5"))
	pg.edit("6", "", "")
	pg.waitFor("the page says it saved", textHas("#form-ok", "Saved"))
	p.client.CloseIdleConnections()
	p.reloaded = true
	wantStatuses(t, "A at limit 6, after the reset", p.statuses(t, 7, "/api/x", xff(clientA)...), seq(6, 200, 1, 429))

	resp, err := chromedp.Run(pg.ctx, chromedp.NavigateResponse(url))
	if err != nil {
		t.Fatal(err)
	}
	if body := pg.text("body"); resp.Status != 403 || !strings.Contains(body, "not allowed to access from origin ''") {
		t.Errorf("a typed navigation under the default admin settings: %d %q; want Caddy's 403 for the empty origin", resp.Status, body)
	}
}
