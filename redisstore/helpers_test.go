package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/internal/redistest"
	"github.com/edgebyte/edgelimit/limiter"
	"github.com/redis/go-redis/v9"
)

// algorithms are those every test runs on.
var algorithms = []limiter.Algorithm{
	limiter.SlidingWindow, limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket,
}

// newClient is a client as the Store wants one: deadlines from the
// context, no retries.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore makes a Store on c for cfg, with a prefix of the test's own.
func newStore(t testing.TB, c redis.UniversalClient, cfg Config) *Store {
	t.Helper()
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "test:" + strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()) + ":"
	}
	s, err := New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// config is the Config of limits for algo, made so that Count requests
// pass back to back on every algorithm: a leaky bucket gets a queue of
// Count−1 and a max delay long enough for it.
func config(algo limiter.Algorithm, limits ...limiter.Limit) Config {
	cfg := Config{Algorithm: algo, Limits: limits}
	if algo == limiter.LeakyBucket {
		cfg.Burst = limits[0].Count - 1
		cfg.MaxDelay = 2 * limits[0].Window
	}
	return cfg
}

// allow calls s.Allow with a deadline and fails the test on an error.
func allow(t testing.TB, s *Store, key string, cost int64) limiter.Decision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := s.Allow(ctx, key, cost)
	if err != nil {
		t.Fatalf("Allow(%q, %d): %v", key, cost, err)
	}
	return d
}

// start runs a redis-server for t and returns a client to it.
func start(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, newClient(t, srv.Addr)
}

// startCluster runs a Redis Cluster of three masters for t (skipped
// with -short) and returns a client to it, as the Store wants one.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped with -short")
	}
	cl := redistest.StartCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

var hour = limiter.Limit{Count: 10, Window: time.Hour}

// argv is the ARGV of c's command.
func (c *batchCall) argv() []any { return c.cmd[3+c.cmd[2].(int):] }

// run runs sc on keys and argv through go-redis's Script (EVALSHA, then
// EVAL on NOSCRIPT), apart from any Batcher.
func (sc *script) run(ctx context.Context, c redis.Scripter, keys []string, argv ...any) *redis.Cmd {
	return redis.NewScript(sc.src.(string)).Run(ctx, c, keys, argv...)
}

// loadScripts loads s's scripts into c's Redis (SCRIPT LOAD), so that
// none of its calls is answered NOSCRIPT.
func loadScripts(t testing.TB, c redis.Scripter, s *Store) {
	t.Helper()
	for _, sc := range []*script{s.script, s.allow} {
		if sc == nil {
			continue
		}
		if sha, err := c.ScriptLoad(t.Context(), sc.src.(string)).Result(); err != nil || sha != sc.sha {
			t.Fatalf("SCRIPT LOAD: %q, %v; want %q", sha, err, sc.sha)
		}
	}
}
