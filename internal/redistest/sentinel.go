package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the Sentinels of StartSentinel monitor their
// master by.
const SentinelMaster = "mymaster"

// Timing of StartSentinel's Sentinels: a master that does not answer for
// downAfter is down; a failover that makes no progress for
// failoverTimeout is abandoned (and retried after twice that).
const (
	downAfter       = time.Second
	failoverTimeout = 3 * time.Second
)

// sentinelWait bounds how long StartSentinel waits for the Sentinels to
// find each other and the replica, and WaitMaster for a new master.
const sentinelWait = 30 * time.Second

// SentinelOptions are the passwords of StartSentinel's servers; empty
// means none.
type SentinelOptions struct {
	// Password is the Sentinels' requirepass (they use it with one
	// another too). Default: none.
	Password string

	// MasterPassword is the requirepass and masterauth of the master and
	// the replica; the Sentinels get it with auth-pass. Default: none.
	MasterPassword string
}

// Sentinel is a master, one replica of it and three Sentinels that
// monitor them as SentinelMaster (quorum 2, down after 1s), all owned by
// one test. Kill the master (or call Failover) and the Sentinels promote
// the replica; WaitMaster waits for that.
//
// Servers with a password cannot Restart (Server.Restart pings without
// authenticating).
type Sentinel struct {
	// Master is the master at start; Replica replicates it.
	Master, Replica *Server

	// Sentinels are the three Sentinel processes.
	Sentinels []*Server

	opts SentinelOptions
}

// StartSentinel runs a master, a replica (replicaof) and three Sentinels
// (redis-server --sentinel, each with its config file in a temp dir) on
// free loopback ports, waits until every Sentinel knows the replica and the
// two other Sentinels, and stops them all when t ends.
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	ports := distinctPorts(t, 5)
	s := &Sentinel{opts: opts}
	// a replica syncs at once, not after the default 5s wait for others
	common := []string{"--repl-diskless-sync-delay", "0"}
	if pw := opts.MasterPassword; pw != "" {
		common = append(common, "--requirepass", pw, "--masterauth", pw)
	}
	s.Master = launch(t, ports[0], opts.MasterPassword, func(dir string) []string { return serverArgs(ports[0], dir, common...) })
	s.Replica = launch(t, ports[1], opts.MasterPassword, func(dir string) []string {
		return serverArgs(ports[1], dir, slices.Concat(common, []string{"--replicaof", "127.0.0.1", strconv.Itoa(ports[0])})...)
	})
	if err := poll(sentinelWait, func(ctx context.Context) error {
		c := s.dataClient(s.Replica.Addr)
		defer c.Close()
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && !containsLine(info, "master_link_status:up") {
			err = fmt.Errorf("replica link not up")
		}
		return err
	}); err != nil {
		t.Fatalf("redistest: replica %s of %s: %v", s.Replica.Addr, s.Master.Addr, err)
	}
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x%016x%08x", rand.Uint64(), rand.Uint64(), rand.Uint32()) // 40 hex digits
	}
	for i, port := range ports[2:] {
		conf := s.sentinelConf(port, ports[0], ids[i])
		// Told of each other and of the replica, the Sentinels need not
		// wait for hello messages (every 2s) to find them.
		for j, other := range ports[2:] {
			if j != i {
				conf += fmt.Sprintf("sentinel known-sentinel %s 127.0.0.1 %d %s\n", SentinelMaster, other, ids[j])
			}
		}
		conf += fmt.Sprintf("sentinel known-replica %s 127.0.0.1 %d\n", SentinelMaster, ports[1])
		s.Sentinels = append(s.Sentinels, launch(t, port, opts.Password, func(dir string) []string {
			file := filepath.Join(dir, "sentinel.conf")
			if err := os.WriteFile(file, []byte(conf+fmt.Sprintf("dir %q\n", dir)), 0o600); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			return []string{file, "--sentinel"}
		}))
	}
	for _, sn := range s.Sentinels {
		if err := poll(sentinelWait, func(ctx context.Context) error {
			c := s.sentinelClient(sn.Addr)
			defer c.Close()
			m, err := c.Master(ctx, SentinelMaster).Result()
			if err == nil && (m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || m["flags"] != "master") {
				err = fmt.Errorf("sees %s replicas, %s other Sentinels, flags %s", m["num-slaves"], m["num-other-sentinels"], m["flags"])
			}
			return err
		}); err != nil {
			t.Fatalf("redistest: Sentinel %s: %v", sn.Addr, err)
		}
	}
	return s
}

// sentinelConf is the config file of the Sentinel id on port monitoring
// the master on masterPort.
func (s *Sentinel) sentinelConf(port, masterPort int, id string) string {
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\nsentinel myid %s\n", port, id) +
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n", SentinelMaster, masterPort) +
		fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", SentinelMaster, downAfter.Milliseconds()) +
		fmt.Sprintf("sentinel failover-timeout %s %d\n", SentinelMaster, failoverTimeout.Milliseconds()) +
		fmt.Sprintf("sentinel parallel-syncs %s 1\n", SentinelMaster)
	if pw := s.opts.MasterPassword; pw != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %q\n", SentinelMaster, pw)
	}
	if pw := s.opts.Password; pw != "" {
		conf += fmt.Sprintf("requirepass %q\n", pw)
	}
	return conf
}

// Addrs are the Sentinels' addresses.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr
	}
	return addrs
}

// Server returns the data server (Master or Replica) at addr, or nil.
func (s *Sentinel) Server(addr string) *Server {
	for _, srv := range []*Server{s.Master, s.Replica} {
		if srv.Addr == addr {
			return srv
		}
	}
	return nil
}

// Failover makes a Sentinel promote the replica now (SENTINEL FAILOVER,
// without the others' agreement). WaitMaster waits for the outcome.
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	var err error
	for _, sn := range s.Sentinels {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c := s.sentinelClient(sn.Addr)
		err = c.Failover(ctx, SentinelMaster).Err()
		c.Close()
		cancel()
		if err == nil {
			return
		}
	}
	t.Fatalf("redistest: SENTINEL FAILOVER %s: %v", SentinelMaster, err)
}

// WaitMaster polls until every Sentinel names the same master, other
// than old, and that server says it is a master (ROLE); it returns that
// server. It fails t after 30s.
func (s *Sentinel) WaitMaster(t testing.TB, old string) *Server {
	t.Helper()
	var addr string
	err := poll(sentinelWait, func(ctx context.Context) error {
		addr = ""
		for _, sn := range s.Sentinels {
			c := s.sentinelClient(sn.Addr)
			a, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
			c.Close()
			if err == nil && len(a) != 2 {
				err = fmt.Errorf("reply %q", a)
			}
			if err != nil {
				return fmt.Errorf("Sentinel %s: %v", sn.Addr, err)
			}
			got := net.JoinHostPort(a[0], a[1])
			if addr != "" && got != addr {
				return fmt.Errorf("Sentinels disagree: %s and %s", addr, got)
			}
			addr = got
		}
		if addr == old {
			return fmt.Errorf("the master is still %s", old)
		}
		c := s.dataClient(addr)
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err == nil && (len(role) == 0 || role[0] != "master") {
			err = fmt.Errorf("%s is not a master yet: ROLE %v", addr, role)
		}
		return err
	})
	if err != nil {
		t.Fatalf("redistest: no new master: %v", err)
	}
	srv := s.Server(addr)
	if srv == nil {
		t.Fatalf("redistest: the Sentinels name %s, none of the test's servers", addr)
	}
	return srv
}

// WaitReplicated waits until the replica of the master at addr has every
// write the master took (WAIT 1), so that a failover loses none of them.
func (s *Sentinel) WaitReplicated(t testing.TB, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := s.dataClient(addr)
	defer c.Close()
	n, err := c.Do(ctx, "WAIT", 1, 5000).Int()
	if err != nil || n < 1 {
		t.Fatalf("redistest: WAIT 1 on %s: %d replicas acknowledged, %v", addr, n, err)
	}
}

// sentinelClient is a one-connection client to the Sentinel at addr, for
// one call: the caller closes it. The call's context bounds it.
func (s *Sentinel) sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, Password: s.opts.Password, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
}

// dataClient is sentinelClient for the master or replica at addr.
func (s *Sentinel) dataClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Password: s.opts.MasterPassword, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
}

// launch starts a redis-server for t on port with the arguments args
// returns for its temp dir, waits until it answers PING (authenticated
// with password, if any), and kills it when t ends.
func launch(t testing.TB, port int, password string, args func(dir string) []string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		t:    t,
		bin:  Binary(t, "redis-server"),
		dir:  dir,
		args: args(dir),
	}
	t.Cleanup(s.Kill)
	if password == "" {
		s.start()
		return s
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	if err := poll(startTimeout, func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: password, PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
		defer c.Close()
		return c.Ping(ctx).Err()
	}); err != nil {
		s.Kill()
		t.Fatalf("redistest: redis-server on %s: %v", s.Addr, err)
	}
	return s
}

// serverArgs are the arguments of a data server on port, as Start gives
// them, then extra.
func serverArgs(port int, dir string, extra ...string) []string {
	return append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "",
	}, extra...)
}

// distinctPorts are n different ports that were free a moment ago.
func distinctPorts(t testing.TB, n int) []int {
	t.Helper()
	seen := make(map[int]bool)
	var ports []int
	for len(ports) < n {
		if p := FreePort(t); !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports
}

// poll calls f, each call bounded by a second, until it returns nil or
// timeout passes; it returns f's last error.
func poll(timeout time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
}

// containsLine is true if text (an INFO reply) has the line.
func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
