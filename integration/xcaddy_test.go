package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// xcaddyVersion is the xcaddy the test installs.
const xcaddyVersion = "v0.4.5"

// TestXcaddyBuild: the README's from-a-checkout xcaddy line works on a
// machine that reaches only the module proxy. The test installs xcaddy
// with go install, runs the README's line as written (with --output),
// and checks the binary: list-modules lists the plugin's four modules,
// and the quickstart config answers its sixth request with 429.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("installs xcaddy and builds Caddy a second time (minutes on two cores)")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	args, err := readmeCheckoutBuild(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	install := exec.Command("go", "install", "github.com/caddyserver/xcaddy/cmd/xcaddy@"+xcaddyVersion)
	install.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install xcaddy: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "caddy")
	build := exec.Command(filepath.Join(dir, "xcaddy"), append(args[1:], "--output", bin)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}

	out, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatalf("caddy list-modules: %v", err)
	}
	modules := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		modules[m] = true
	}
	for _, m := range []string{"http.handlers.rate_limit", "rate_limit", "admin.api.rate_limit", "http.handlers.rate_limit_ui"} {
		if !modules[m] {
			t.Errorf("list-modules of the xcaddy build lacks %s", m)
		}
	}

	port := freePorts(t, 1)[0]
	run := exec.Command(bin, "run", "--config", filepath.Join(root, "caddyfile_examples", "quickstart.Caddyfile"))
	run.Env = append(os.Environ(), fmt.Sprintf("EDGELIMIT_PORT=%d", port), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	logs := &syncBuffer{}
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run.Process.Kill()
		run.Wait()
		if t.Failed() {
			t.Logf("caddy log:\n%s", logs.String())
		}
	})
	url := fmt.Sprintf("http://localhost:%d/api/hello", port)
	client := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := client.Get(fmt.Sprintf("http://localhost:%d/", port)); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the xcaddy build did not serve the quickstart within 30s")
		}
	}
	var got []int
	for range 6 {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, resp.StatusCode)
	}
	wantStatuses(t, "the quickstart's /api/hello on the xcaddy build", got, seq(5, 200, 1, 429))
}

// readmeCheckoutBuild is the README's xcaddy line for a checkout (the one
// that builds from "."), split into words.
func readmeCheckoutBuild(readme string) ([]string, error) {
	f, err := os.Open(readme)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "xcaddy build ") && strings.HasSuffix(line, "=.") {
			return strings.Fields(line), nil
		}
	}
	return nil, errors.New("README.md has no xcaddy line building from a checkout (ending in =.)")
}
