package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultFleetTTL is how long a node stays counted after its last beat,
// when FleetConfig.TTL is 0: five beats of one second.
const DefaultFleetTTL = 5 * time.Second

// FleetKey is the name, after the key prefix, of the sorted set in which
// the nodes of a fleet register: "<prefix>{nodes}". The braces make it
// its own Redis Cluster hash tag, and no rule's key has this form (a
// rule's keys are "<prefix><rule>:{<key>}", the rule never empty).
const FleetKey = "{nodes}"

// FleetConfig describes a node's membership in a fleet.
type FleetConfig struct {
	// KeyPrefix is the prefix of the rules' keys: processes with the same
	// Redis and prefix share limits, so they are one fleet. It must not
	// contain '{' or '}'. Default: "edgelimit:".
	KeyPrefix string
	// TTL is how long this node stays counted after its last beat: beat
	// more often than that (a third of it or less tolerates a missed beat
	// or two). Whole milliseconds, at least one. Each node's entry expires
	// by its own TTL, so nodes may differ. Default: DefaultFleetTTL.
	TTL time.Duration
	// ID names this node in the set. Default: host name, process id and
	// 8 random bytes, so restarts and copies of a host never collide.
	ID string
}

// Fleet counts the processes that share a Redis and key prefix (the
// nodes that share the limits of rules kept in Redis), in Redis itself,
// so that no node needs to be told how many there are. Each node beats:
// one script (on Redis's clock) adds the node to the sorted set
// <prefix>{nodes} with its expiry as score, drops the members whose
// expiry has passed, keeps the set alive as long as its latest member
// and returns how many are left. A node that stops beating is forgotten
// TTL after its last beat; Leave forgets it at once.
//
// A Fleet starts no goroutine: its owner calls Beat, more often than TTL,
// each call with a deadline. Nodes is the count of the successful beat
// started last, 1 before any and never less: while Redis is away, the
// last fleet seen is the best guess. A Fleet is safe for concurrent use.
type Fleet struct {
	client redis.UniversalClient
	key    string
	id     string
	ttl    int64 // ms
	nodes  atomic.Int64

	// Beats may overlap (a heartbeat and a caller of its own): the count
	// of the latest one started wins, not of the one that answers last.
	started atomic.Uint64 // beats started
	mu      sync.Mutex    // guards stored and the store of nodes
	stored  uint64        // the beat whose count nodes holds
}

// fleetScript registers ARGV[1] until now+ARGV[2] ms, forgets the expired
// and returns the count. KEYS[1] is the set.
var fleetScript = redis.NewScript(`
if redis.replicate_commands then pcall(redis.replicate_commands) end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now))
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(tonumber(last[2]) - now, ttl)))
return redis.call('ZCARD', KEYS[1])
`)

// NewFleet returns this node's membership in the fleet of cfg on client,
// or cfg's error. It does not touch Redis: the first Beat registers.
func NewFleet(client redis.UniversalClient, cfg FleetConfig) (*Fleet, error) {
	if client == nil {
		return nil, errors.New("redisstore: no client")
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	switch {
	case strings.ContainsAny(prefix, "{}"):
		return nil, fmt.Errorf("key prefix %q: must not contain '{' or '}'", cfg.KeyPrefix)
	case cfg.TTL < 0 || cfg.TTL%time.Millisecond != 0:
		return nil, fmt.Errorf("fleet ttl %s: must be a positive whole number of milliseconds", cfg.TTL)
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultFleetTTL
	}
	id := cfg.ID
	if id == "" {
		id = nodeID()
	}
	f := &Fleet{client: client, key: prefix + FleetKey, id: id, ttl: ttl.Milliseconds()}
	f.nodes.Store(1)
	return f, nil
}

// nodeID is "<host>:<pid>:<16 hex digits>".
func nodeID() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
}

// Key is the Redis key of the fleet's set.
func (f *Fleet) Key() string { return f.key }

// ID is this node's member in the set.
func (f *Fleet) ID() string { return f.id }

// TTL is how long this node stays counted after a beat.
func (f *Fleet) TTL() time.Duration { return time.Duration(f.ttl) * time.Millisecond }

// Nodes is the number of nodes the successful Beat started last counted,
// this one included (a beat that answers after a later one does not count);
// 1 before any.
func (f *Fleet) Nodes() int { return int(f.nodes.Load()) }

// Beat registers this node for another TTL, on Redis's clock, forgets the
// nodes whose TTL has passed, and returns how many are left, this one
// included. On an error (Redis away, ctx's deadline) it returns the last
// count, which it keeps.
func (f *Fleet) Beat(ctx context.Context) (int, error) {
	seq := f.started.Add(1)
	n, err := fleetScript.Run(ctx, f.client, []string{f.key}, f.id, f.ttl).Int64()
	if err != nil {
		return f.Nodes(), fmt.Errorf("redisstore: fleet beat: %w", wrapUnavailable(err))
	}
	n = max(n, 1)
	f.mu.Lock()
	if seq > f.stored { // an earlier beat answering late does not undo a later one
		f.stored = seq
		f.nodes.Store(n)
	}
	f.mu.Unlock()
	return int(n), nil
}

// Leave forgets this node in Redis at once (at shutdown), so the others
// count one fewer at their next beat. The count Nodes keeps is unchanged.
// A Beat after Leave registers the node again.
func (f *Fleet) Leave(ctx context.Context) error {
	if err := f.client.ZRem(ctx, f.key, f.id).Err(); err != nil {
		return fmt.Errorf("redisstore: fleet leave: %w", wrapUnavailable(err))
	}
	return nil
}

// wrapUnavailable puts ErrUnavailable in the chain of err if it means
// Redis could not answer.
func wrapUnavailable(err error) error {
	if unavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
