// Package integration tests edgelimit inside a real Caddy binary: the
// binary is built once per test run from ./cmd/caddy, and each test starts
// its own Caddy process from a Caddyfile, on free loopback ports.
package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// caddyBin is the Caddy binary built by TestMain; "" under -short.
var caddyBin string

// TestMain builds the Caddy binary once, runs the tests, and removes it.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "edgelimit-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	bin, err := buildCaddy(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	caddyBin = bin
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCaddy builds ./cmd/caddy into dir, from the module root.
func buildCaddy(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "caddy")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/edgebyte/edgelimit/cmd/caddy")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building caddy: %v\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot is the directory holding this module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// needCaddy skips t under -short, where the binary is not built.
func needCaddy(t *testing.T) {
	t.Helper()
	if testing.Short() || caddyBin == "" {
		t.Skip("skipping: needs the Caddy binary, which is not built under -short")
	}
}

// globalOptions are the lines every test config puts in its global options
// block (as {{.Global}}): the admin endpoint on a free port, no automatic
// HTTPS, nothing persisted or stored outside the test's directory.
const globalOptions = `admin {{.Admin}}
	auto_https off
	persist_config off
	storage file_system {{.Storage}}`

// trustLoopback is a global options block for tests that give clients
// different IPs with X-Forwarded-For: requests come from loopback, a
// trusted proxy, so Caddy's {client_ip} is the forwarded address.
const trustLoopback = `{
	{{.Global}}
	servers {
		trusted_proxies static 127.0.0.1/8
		trusted_proxies_strict
	}
}
`

// plainGlobals is the global options block with nothing but globalOptions.
const plainGlobals = `{
	{{.Global}}
}
`

// caddyfileData fills a test Caddyfile template.
type caddyfileData struct {
	HTTP    int    // the HTTP server's port
	Admin   string // the admin endpoint, host:port
	Storage string // a directory for Caddy's storage
	Global  string // globalOptions, filled in
}

// caddyProc is a running Caddy.
type caddyProc struct {
	cmd    *exec.Cmd
	data   caddyfileData
	dir    string
	host   string // Host header sent with every request; "" for the URL's
	client *http.Client
	stderr *syncBuffer
	exited chan struct{}

	ip       string   // the address its HTTP server and admin endpoint are reached at
	reloaded bool     // a config was loaded since the start
	env      []string // the environment it was started with, beyond the harness's
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startCaddy runs Caddy on caddyfile, a text/template of caddyfileData,
// and waits until it serves. It is stopped when t ends; its log is shown
// if t failed.
func startCaddy(t *testing.T, caddyfile string, env ...string) *caddyProc {
	t.Helper()
	return startCaddyAt(t, loopback, caddyfile, env...)
}

// place is where a Caddy runs: in a network namespace, at an address of
// it, or on the test's own loopback.
type place struct{ netns, ip string }

// loopback is the test's own network.
var loopback = place{ip: "127.0.0.1"}

// startCaddyAt is startCaddy at a place.
func startCaddyAt(t *testing.T, at place, caddyfile string, env ...string) *caddyProc {
	t.Helper()
	needCaddy(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	return launchCaddy(t, at, dir, caddyfileData{
		HTTP:    ports[0],
		Admin:   net.JoinHostPort(at.ip, fmt.Sprint(ports[1])),
		Storage: filepath.Join(dir, "storage"),
	}, caddyfile, env...)
}

// restart stops p (gracefully, with SIGTERM; with kill, SIGKILL: no
// cleanup runs) and starts a Caddy in its place on caddyfile: the same
// directory (its data directory, so the same instance ID, and its
// storage), ports and environment.
func (p *caddyProc) restart(t *testing.T, caddyfile string, kill bool) *caddyProc {
	t.Helper()
	p.client.CloseIdleConnections()
	if kill {
		p.cmd.Process.Kill()
		<-p.exited
	} else {
		p.stop()
	}
	data := p.data
	data.Global = ""
	return launchCaddy(t, place{ip: p.ip}, p.dir, data, caddyfile, p.env...)
}

// launchCaddy runs Caddy in dir with data's ports and storage.
func launchCaddy(t *testing.T, at place, dir string, data caddyfileData, caddyfile string, env ...string) *caddyProc {
	t.Helper()
	p := &caddyProc{
		dir:    dir,
		ip:     at.ip,
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
		data:   data,
		client: &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				Proxy:               nil,
				MaxIdleConns:        64,
				MaxIdleConnsPerHost: 64,
				IdleConnTimeout:     30 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	p.data.Global = render(t, globalOptions, p.data)
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(render(t, caddyfile, p.data)), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(caddyBin, "run", "--config", file, "--adapter", "caddyfile")
	if at.netns != "" { // ip netns exec execs Caddy: the process is Caddy's
		p.cmd = exec.Command("ip", append([]string{"netns", "exec", at.netns}, p.cmd.Args...)...)
	}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(),
		"HOME="+dir,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		fmt.Sprintf("EDGELIMIT_PORT=%d", p.data.HTTP), // for {$EDGELIMIT_PORT} in caddyfile_examples
	)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.env = env
	p.cmd.Stdout = p.stderr
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.client.CloseIdleConnections() // else Caddy's graceful shutdown waits for them
		p.stop()
		if t.Failed() {
			t.Logf("caddy log:\n%s", p.log())
		}
	})
	p.waitReady(t)
	return p
}

// render fills a template.
func render(t *testing.T, text string, data caddyfileData) string {
	t.Helper()
	tmpl, err := template.New("caddyfile").Option("missingkey=error").Parse(text)
	if err != nil {
		t.Fatalf("caddyfile template: %v", err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		t.Fatalf("caddyfile template: %v", err)
	}
	return b.String()
}

// freePorts are n TCP ports that were free on loopback a moment ago (all
// held at once) and that no earlier call in this process handed out.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if _, taken := portsGiven.LoadOrStore(port, true); !taken {
			ports = append(ports, port)
		}
	}
	return ports
}

// portsGiven are the ports freePorts has handed out in this process. A
// port is closed again before Caddy binds it, and Caddy binds with
// SO_REUSEPORT: two parallel tests given the same port would each start
// a Caddy on it, and the kernel would share their connections between
// the two (a request meeting the other test's limits).
var portsGiven sync.Map

// waitReady polls the admin endpoint, then the HTTP port, every 20 ms for
// up to 15 s: it waits for the process to come up.
func (p *caddyProc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	admin := "http://" + p.data.Admin + "/config/"
	for {
		select {
		case <-p.exited:
			t.Fatalf("caddy exited before it was ready (log below)")
		default:
		}
		if p.adminUp(admin) && p.httpUp() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy not ready after 15s (log below)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *caddyProc) adminUp(url string) bool {
	resp, err := p.client.Get(url)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (p *caddyProc) httpUp() bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(p.ip, fmt.Sprint(p.data.HTTP)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// log is Caddy's output but for the admin endpoint's logs of requests
// (the readiness polls).
func (p *caddyProc) log() string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(p.stderr.String(), "\n") {
		if !strings.Contains(line, `"logger":"admin.api","msg":"received request"`) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// waitLog waits up to 5 s for Caddy to write a log line containing all
// of parts, and returns it; "" if none came.
func (p *caddyProc) waitLog(parts ...string) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			found := true
			for _, part := range parts {
				found = found && strings.Contains(line, part)
			}
			if found {
				return line
			}
		}
		if time.Now().After(deadline) {
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends Caddy: SIGTERM, then SIGKILL after 5 s.
func (p *caddyProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// url is the address of path on the HTTP server.
func (p *caddyProc) url(path string) string {
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(p.ip, fmt.Sprint(p.data.HTTP)), path)
}

// get requests path with headers given as name, value pairs ("Host" sets
// the request's host), and returns the status, the response headers and
// the body.
func (p *caddyProc) get(t *testing.T, path string, headers ...string) (int, http.Header, string) {
	t.Helper()
	if len(headers)%2 != 0 {
		t.Fatalf("get %s: headers must be name, value pairs", path)
	}
	req, err := http.NewRequest(http.MethodGet, p.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.host != "" {
		req.Host = p.host
	}
	addHeaders(req, headers)
	resp, err := p.send(t, req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// send sends req, a request without a body. A connection accepted by the
// old server as it stopped (Caddy's listeners are shared across a
// reload) closes unanswered: the request never reached a handler, so
// after a reload it is tried once more. (Had it been counted, the exact
// counts asserted after reloads would show it.)
func (p *caddyProc) send(t *testing.T, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := p.client.Do(req)
	if err != nil && p.reloaded && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		t.Logf("%s %s after a reload: %v; retrying once", req.Method, req.URL.Path, err)
		resp, err = p.client.Do(req)
	}
	return resp, err
}

// addHeaders adds name, value pairs to req; "Host" sets req.Host.
func addHeaders(req *http.Request, headers []string) {
	for i := 0; i+1 < len(headers); i += 2 {
		if http.CanonicalHeaderKey(headers[i]) == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
}

// status requests path and returns only the status.
func (p *caddyProc) status(t *testing.T, path string, headers ...string) int {
	t.Helper()
	code, _, _ := p.get(t, path, headers...)
	return code
}

// statuses requests path n times, one after another, and returns the
// statuses in order.
func (p *caddyProc) statuses(t *testing.T, n int, path string, headers ...string) []int {
	t.Helper()
	codes := make([]int, n)
	for i := range codes {
		codes[i] = p.status(t, path, headers...)
	}
	return codes
}

// reload replaces the running config with caddyfile (a template, filled
// as at start) through the admin endpoint's /load.
func (p *caddyProc) reload(t *testing.T, caddyfile string) {
	t.Helper()
	p.load(t, "text/caddyfile", render(t, caddyfile, p.data))
	// The old config's server closes its connections as it stops; start
	// afresh rather than race it for a pooled one.
	p.client.CloseIdleConnections()
	p.reloaded = true
}

// forceReload is reload even if caddyfile is the running config, as
// `caddy reload --force` does: Caddy otherwise skips loading a config
// identical to the running one, and files the config names (a geoip
// database) are not read again.
func (p *caddyProc) forceReload(t *testing.T, caddyfile string) {
	t.Helper()
	p.load(t, "text/caddyfile", render(t, caddyfile, p.data), "Cache-Control", "must-revalidate")
	p.client.CloseIdleConnections()
	p.reloaded = true
}

// load POSTs body to the admin /load endpoint, with the given header
// pairs; anything but 200 fails t.
func (p *caddyProc) load(t *testing.T, contentType, body string, headers ...string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.data.Admin+"/load", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	addHeaders(req, headers)
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("POST /load: %v", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /load: %s: %s", resp.Status, msg)
	}
}

// count calls f n times and tallies the statuses it returns.
func count(t *testing.T, n int, f func() int) map[int]int {
	t.Helper()
	tally := make(map[int]int)
	for range n {
		tally[f()]++
	}
	return tally
}

// concurrently calls f(i) for i in [0, n) at once (after a common start)
// and returns the statuses and how long each call took from that start.
func concurrently(n int, f func(i int) int) ([]int, []time.Duration) {
	codes := make([]int, n)
	took := make([]time.Duration, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	var t0 time.Time
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			codes[i] = f(i)
			took[i] = time.Since(t0)
		}()
	}
	ready.Wait()
	t0 = time.Now()
	close(start)
	done.Wait()
	return codes, took
}

// rawGet is get for use off the test goroutine: errors are returned, not
// reported through t.
func (p *caddyProc) rawGet(ctx context.Context, path string, headers ...string) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(path), nil)
	if err != nil {
		return 0, nil, err
	}
	if p.host != "" {
		req.Host = p.host
	}
	addHeaders(req, headers)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

// wantStatuses fails t unless got equals want, element by element.
func wantStatuses(t *testing.T, what string, got, want []int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: statuses %v, want %v", what, got, want)
	}
}

// seq is n copies of a, then m copies of b.
func seq(n, a, m, b int) []int {
	s := make([]int, 0, n+m)
	for range n {
		s = append(s, a)
	}
	for range m {
		s = append(s, b)
	}
	return s
}

// xff is the X-Forwarded-For header pair for ip.
func xff(ip string) []string { return []string{"X-Forwarded-For", ip} }
