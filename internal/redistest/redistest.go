// Package redistest gives a test a real redis-server of its own, on a free
// loopback port, stopped when the test ends.
//
// The server comes from redis-server on PATH or, failing that, from
// Debian's redis-server package, installed with apt-get (the tests run as
// root on the project's machines; CI installs nothing else for them). If
// neither works the test is skipped, saying why. The server keeps nothing on
// disk (--save "" --appendonly no) and lives in the test's temp dir.
//
// Server.Kill and Server.Restart let fault tests take Redis away and bring it
// back on the same address.
package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/debpkg"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	t    testing.TB
	bin  string
	args []string
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

var (
	installOnce sync.Once
	installErr  error
)

// Binary returns the path of a program from the redis-server package
// (redis-server or redis-cli), installing the package if it is missing, or
// skips the test.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	installOnce.Do(func() { installErr = debpkg.Install("redis-server") })
	if installErr != nil {
		t.Skipf("redistest: %s not on PATH and apt-get install redis-server failed: %v", name, installErr)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("redistest: %s not on PATH even after installing redis-server", name)
	}
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a redis-server for t on a free port, with extra arguments
// appended to its command line, waits until it answers PING, and stops it
// when t ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startOn(t, FreePort(t), extra...)
}

// startOn is Start on a given port.
func startOn(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	bin := Binary(t, "redis-server")
	dir := t.TempDir()
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		t:    t,
		bin:  bin,
		dir:  dir,
		args: append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--logfile", "",
		}, extra...),
	}
	t.Cleanup(s.Kill)
	s.start()
	return s
}

// start launches the process and waits for PING.
func (s *Server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	if err := WaitPing(s.Addr, startTimeout); err != nil {
		s.Kill()
		s.t.Fatalf("redistest: redis-server on %s: %v", s.Addr, err)
	}
}

// Kill stops the server at once (SIGKILL) and waits for it to exit. It is
// safe to call more than once.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Pause stops the server (SIGSTOP) without closing anything: connections
// stay open and new ones are accepted by the kernel, but nothing is
// answered, as when Redis hangs or the network drops packets. Resume
// continues it. Both do nothing if the server is not running.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart kills the server if it runs and starts a new, empty one on the
// same address.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// WaitPing polls addr with PING until it answers +PONG or timeout passes.
func WaitPing(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = ping(addr); err == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a wait for readiness
	}
	return fmt.Errorf("no PONG within %s: %v", timeout, err)
}

// ping sends one inline PING and reads the answer.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("answer %q", buf[:n])
	}
	return nil
}

// tail is the end of a command's output, for an error message.
func tail(b []byte) []byte {
	if len(b) > 500 {
		return b[len(b)-500:]
	}
	return b
}
