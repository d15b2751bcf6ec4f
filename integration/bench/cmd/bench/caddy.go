package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where the benchmarked servers listen. Only one runs at a time, with an
// upstream for the rows that proxy.
const (
	serverAddr        = "127.0.0.1:18480"
	adminAddr         = "127.0.0.1:18481"
	serverURL         = "http://" + serverAddr + "/"
	upstreamAddr      = "127.0.0.1:18490"
	upstreamAdminAddr = "127.0.0.1:18491"
)

// A binary is one of the three Caddy builds compared.
type binary string

const (
	plain     binary = "plain"
	edgelimit binary = "edgelimit"
	ratelimit binary = "caddy-ratelimit"
)

// path is where build() put b.
func (b binary) path(binDir string) string {
	name := "caddy-" + string(b)
	if b == ratelimit {
		name = "caddy-ratelimit"
	}
	return filepath.Join(binDir, name)
}

// build compiles bins, Caddy binaries of this module, into binDir.
func build(binDir string, bins ...binary) error {
	for _, b := range bins {
		cmd := filepath.Base(b.path(binDir))
		c := exec.Command("go", "build", "-o", b.path(binDir), "./cmd/"+cmd)
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("building %s: %w", cmd, err)
		}
	}
	return nil
}

// server is a running Caddy under test, pinned to one core.
type server struct {
	cmd   *exec.Cmd
	logs  bytes.Buffer
	admin string // its admin endpoint's address
}

// start runs bin with handlers as its one route on serverAddr, on core
// cpu with GOMAXPROCS=1 (cpu < 0: every core, GOMAXPROCS as Go sets it),
// and waits until it answers.
func start(bin string, handlers []map[string]any, cpu int, dir string) (*server, error) {
	return startAt(bin, serverAddr, adminAddr, handlers, nil, cpu, dir)
}

// startAt is start with the addresses given, and rateLimitApp (if not
// nil) as the rate_limit app's config.
func startAt(bin, listen, admin string, handlers []map[string]any, rateLimitApp map[string]any, cpu int, dir string) (*server, error) {
	apps := map[string]any{"http": map[string]any{"servers": map[string]any{"bench": map[string]any{
		"listen":          []string{listen},
		"automatic_https": map[string]any{"disable": true},
		"routes":          []any{map[string]any{"handle": handlers}},
	}}}}
	if rateLimitApp != nil {
		apps["rate_limit"] = rateLimitApp
	}
	cfg := map[string]any{
		"admin":   map[string]any{"listen": admin},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps":    apps,
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "config-"+strings.ReplaceAll(listen, ":", "-")+".json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return nil, err
	}
	s := &server{admin: admin}
	env := append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	s.cmd = exec.Command(bin, "run", "--config", file)
	if cpu >= 0 {
		s.cmd = exec.Command("taskset", "-c", strconv.Itoa(cpu), bin, "run", "--config", file)
		env = append(env, "GOMAXPROCS=1")
	}
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + listen + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("%s did not answer in 20s:\n%s", bin, s.logs.String())
}

// stop ends the server and waits for it.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// rss is the server's resident set, in bytes (VmRSS).
func (s *server) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
}

// heap is the server's live heap after a collection: the admin endpoint's
// heap profile with gc=1 collects first, then expvar's memstats tell
// HeapAlloc.
func (s *server) heap() (int64, error) {
	resp, err := http.Get("http://" + s.admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = http.Get("http://" + s.admin + "/debug/vars")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var vars struct {
		Memstats struct{ HeapAlloc int64 } `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return 0, err
	}
	return vars.Memstats.HeapAlloc, nil
}
