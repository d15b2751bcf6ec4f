package caddymodule

// Blocks (block_for): a key that a rule denies is refused for a while,
// cheaply, before any decision. A rule with store local keeps its blocked
// keys in a limiter.Blocks, one per rule name in the registry (so blocks
// survive a reload that keeps the rule), shared with the cluster's other
// nodes through the gossip reports; a rule with store redis has them in
// Redis, read and started by the decision's script, and keeps in a
// limiter.Blocks those its on_store_error local fallback starts while
// Redis is away, enforced here until they end.

import (
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/gossip"
	"github.com/edgebyte/edgelimit/limiter"
)

// blockedEvent is the Caddy event emitted when a block starts.
const blockedEvent = "rate_limit_blocked"

// abuse is what a provisioned rule needs of block_for, count_status and
// cost_header on the request path.
type abuse struct {
	blocks      *limiter.Blocks      // block_for, store local, not shadow; set at Provision
	after       bool                 // count_status or cost_header: reserved before, settled after
	statuses    ruleconfig.StatusSet // count_status; all statuses without
	costHeader  string               // cost_header, canonical; "" without
	hasStatuses bool
}

// newAbuse reads what the request path needs of cfg's abuse response.
func newAbuse(cfg *ruleconfig.Rule) (abuse, error) {
	a := abuse{after: cfg.CostHeader != "" || cfg.CountStatus != nil}
	if cfg.CountStatus != nil {
		var err error
		if a.statuses, err = ruleconfig.ParseStatuses(cfg.CountStatus); err != nil {
			return a, err
		}
		a.hasStatuses = true
	}
	if cfg.CostHeader != "" {
		a.costHeader = http.CanonicalHeaderKey(cfg.CostHeader)
	}
	return a, nil
}

// abuseCounters are a rule's counts of abuse response, kept by name across
// reloads (in ruleStats).
type abuseCounters struct {
	redisBlocks      atomic.Uint64 // blocks Redis started on this node's decisions
	costHeaderErrors atomic.Uint64 // cost_header absent or invalid: 1 unit taken
}

// blockConfig is what a rule's Blocks are made with.
type blockConfig struct {
	durations []time.Duration
	reset     time.Duration
	maxKeys   int
}

// blockNames maps gossip.KeyHash of a rule name to the name, for the
// blocks other nodes send (under registry.mu). A name is never removed:
// one whose rule went away finds nothing in the registry.
var blockNames = map[uint64]string{}

// blocksFor returns the blocked keys of rule (acquired already), or nil if
// it has no block_for, or it is in shadow (blocks no one); with store
// redis, the blocks its local fallback started. The registry keeps them by name: a reload that keeps
// block_for and block_reset keeps them; one that changes them starts anew
// with the blocks running carried over.
func (rs *rules) blocksFor(r ruleconfig.Rule, clustered bool) (*limiter.Blocks, error) {
	if len(r.BlockFor) == 0 || r.Shadow {
		return nil, nil
	}
	cfg := blockConfig{durations: r.BlockDurations(), reset: time.Duration(r.BlockReset), maxKeys: r.MaxKeys}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s := rs.byName[r.Name]
	if clustered {
		blockNames[gossip.KeyHash(r.Name)] = r.Name
	}
	if s.blocks != nil && slices.Equal(s.blockCfg.durations, cfg.durations) && s.blockCfg.reset == cfg.reset && s.blockCfg.maxKeys == cfg.maxKeys {
		return s.blocks, nil
	}
	b, err := limiter.NewBlocks(cfg.durations, cfg.reset, cfg.maxKeys)
	if err != nil {
		return nil, err
	}
	if s.blocks != nil {
		now := time.Now()
		for _, k := range s.blocks.ListAt(now, 0) {
			b.MergeAt(k.Key, k.Until, k.Offences, now)
		}
	}
	s.blocks, s.blockCfg = b, cfg
	return b, nil
}

// blockedAt reports whether key is blocked by the rule at now, and until
// when: one atomic load for a rule with no block running, nothing without
// block_for.
func (ru *rule) blockedAt(key string, now time.Time) (time.Time, bool) {
	if ru.abuse.blocks == nil {
		return time.Time{}, false
	}
	return ru.abuse.blocks.BlockedAt(key, now)
}

// blockedWait is how long a request of a key blocked until until waits:
// the block's rest, or the limits' wait if later (a client told to come
// back at the block's end while still over a limit would be denied, and
// blocked again, longer).
func (ru *rule) blockedWait(a *App, f facts, now, until time.Time) time.Duration {
	wait := until.Sub(now)
	if ru.store != nil || len(ru.Limits) == 0 {
		return wait
	}
	scale := f.scale
	if sh := a.sharing(); ru.clustered && sh != nil {
		// this node's share of the key's limit, as decide peeks it
		limit := uint32(min(limiter.ScaledCount(ru.Limits[0].Count, scale), math.MaxUint32))
		share, _ := sh.ShareAt(ru.hash, f.key, limit, now)
		scale *= share
	}
	if d := ru.lim.PeekScaledAt(f.key, now, f.cost, scale); !d.Allowed {
		wait = max(wait, denialWait(&d, f.cost))
	}
	return wait
}

// offend records a denial of the rule (not shadow) for blocks: in process,
// the key's next block starts (a new one is logged, emitted, published to
// the cluster, and pins the key's counters), and the denial's RetryAfter
// is at least the block's rest. With store redis the decision's script
// did it (or, when the local fallback decided, the rule's own blocks
// do); offend reports true if the key was refused by a block in force
// there, rather than denied by the limits.
func (h *Handler) offend(ru *rule, q *request, f facts, v *verdict) (blocked bool) {
	if b := v.block; b.Blocked() {
		if !b.Started {
			return true
		}
		ru.stats.abuse.redisBlocks.Add(1)
		h.blockStarted(ru, q, f.key, b.Until, int(b.Offences))
		return false
	}
	if ru.abuse.blocks == nil || (ru.store != nil && v.from != fromLocal) || !(f.scale > 0) || !ru.fleetOver(h.app, f, q.now) {
		return false // a key refused by its factor (a tier or override at 0) has not offended: no block outlives a DELETE of the override
	}
	until, offences, isNew := ru.abuse.blocks.OffendAt(f.key, q.now)
	if until.IsZero() { // refused: the rule's blocks are full of running blocks
		return false
	}
	v.d.RetryAfter = max(v.d.RetryAfter, until.Sub(q.now))
	if isNew {
		ru.lim.MarkSpent(f.key)
		if sh := h.app.sharing(); sh != nil && ru.clustered {
			sh.PublishBlock(ru.hash, f.key, until, offences)
		}
		h.blockStarted(ru, q, f.key, until, offences)
	}
	return false
}

// fleetOver reports whether a denial of f's key found the fleet over the
// key's limit, which alone starts a block: always for a rule not shared;
// for a shared rule, when this node's own count has no room for the
// request under the whole limit, or its count and the others' last
// reported (a window's: buckets report none) leave less than the request
// and the floors the shares keep for the other nodes (gossip.DefaultFloor
// of the limit). A denial at a share that has not followed the key's use
// here yet (the cold share, a raise on its way) starts none: the key asks
// for more in this node's next report (a key of limit 30 an hour was
// blocked for the hour after 11 requests on one node of three).
//
// A bucket of a window of gossip.RescaleMinWindow or more keeps its units
// in use across its share (limiter.Limiter.RescaleAt): its count here is
// those units at its share, against its capacity.
func (ru *rule) fleetOver(a *App, f facts, now time.Time) bool {
	sh := a.sharing()
	if !ru.clustered || sh == nil {
		return true
	}
	limit := float64(limiter.ScaledCount(ru.Limits[0].Count, f.scale))
	here := int64(0)
	switch algo := limiter.Algorithm(ru.Algorithm); {
	case (algo == limiter.TokenBucket || algo == limiter.LeakyBucket) && ru.Limits[0].Span() >= gossip.RescaleMinWindow:
		share, _ := sh.ShareAt(ru.hash, f.key, uint32(min(limit, math.MaxUint32)), now)
		here = ru.lim.UsedScaledAt(f.key, now, f.scale*share)
		if algo == limiter.TokenBucket && ru.Burst > 0 {
			limit = float64(limiter.ScaledCount(ru.Burst, f.scale))
		}
		if float64(here+f.cost) > limit {
			return true
		}
	default:
		if d := ru.lim.PeekScaledAt(f.key, now, f.cost, f.scale); !d.Allowed {
			return true
		}
		if algo != limiter.TokenBucket && algo != limiter.LeakyBucket {
			here = ru.lim.UsedAt(f.key, now) // a short window's bucket reports no use
		}
	}
	fleet := here + int64(sh.OthersUsed(ru.hash, f.key, now)) + f.cost
	return float64(fleet) > limit*(1-gossip.DefaultFloor)
}

// blockStarted logs a new block (sampled, as denials) and emits the
// rate_limit_blocked event: the rule, the client IP, the block's end and
// length in whole seconds, the key's offences; the key only with log_key.
func (h *Handler) blockStarted(ru *rule, q *request, key string, until time.Time, offences int) {
	secs := max(1, ceilSeconds(until.Sub(q.now)))
	if ce := h.denials.Check(zap.InfoLevel, "rate limit block started"); ce != nil {
		fields := []zap.Field{
			zap.String("rule", ru.Name),
			zap.String("client_ip", q.clientIP()),
			zap.Time("until", until),
			zap.Int64("block_seconds", secs),
			zap.Int("offences", offences),
		}
		if ru.LogKey {
			fields = append(fields, zap.String("key", shownKey(key)))
		}
		ce.Write(fields...)
	}
	if h.events == nil || !h.events.ShouldEmit(blockedEvent) {
		return
	}
	data := map[string]any{
		"rule":          ru.Name,
		"client_ip":     q.clientIP(),
		"until":         until.UTC().Format(time.RFC3339Nano),
		"block_seconds": secs,
		"offences":      offences,
	}
	if ru.LogKey {
		data["key"] = shownKey(key)
	}
	h.events.Emit(h.ctx, blockedEvent, data)
}

// blockFromCluster takes a block another node made (gossip's OnBlock):
// the rule found by its name's hash merges it, and its counters are pinned
// while it runs.
func blockFromCluster(rule uint64, key string, until time.Time, offences int) {
	registry.mu.Lock()
	name, ok := blockNames[rule]
	var b *limiter.Blocks
	var lim *limiter.Limiter
	if s := registry.byName[name]; ok && s != nil {
		b, lim = s.blocks, s.lim
	}
	registry.mu.Unlock()
	if b == nil {
		return
	}
	now := time.Now()
	if lifted.stale(name, key, b.StartOf(until, offences), now) {
		return // a block begun before the lift, in a report sent before it
	}
	if b.MergeAt(key, until, offences, now) && lim != nil && until.After(now) {
		lim.MarkSpent(key)
	}
}

// liftedBlocks remembers the blocks lifted (by the admin API, here or on
// another node), and when, until the lifted block would have ended: a
// report sent before the lift reached its node can arrive after the reset
// and must not put a block back, neither the lifted one nor another
// node's own block of the key begun before the lift (it may end later).
// Bounded: past maxLifted running entries, a lift is not remembered (the
// block may then come back once, until it ends).
type liftedBlocks struct {
	mu    sync.Mutex
	lifts map[blockID]lift
}

// lift is when a key's block was lifted here, and how long to remember it.
type lift struct{ at, until time.Time }

// blockID is a key of a rule, by name.
type blockID struct{ rule, key string }

const maxLifted = 10_000

var lifted = liftedBlocks{lifts: map[blockID]lift{}}

// remember records that the block of key, ending at until, was lifted at
// now.
func (l *liftedBlocks) remember(rule, key string, until, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lifts) >= maxLifted {
		for id, x := range l.lifts {
			if !x.until.After(now) {
				delete(l.lifts, id)
			}
		}
		if len(l.lifts) >= maxLifted {
			return
		}
	}
	l.lifts[blockID{rule, key}] = lift{at: now, until: until}
}

// stale reports whether a block of key that began at started, told at
// now, began before a lift of the key remembered here.
func (l *liftedBlocks) stale(rule, key string, started, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	x, ok := l.lifts[blockID{rule, key}]
	if ok && !x.until.After(now) {
		delete(l.lifts, blockID{rule, key})
		return false
	}
	return ok && !started.After(x.at)
}

// liftLocal lifts a key's block on this node (the admin API's DELETE, here
// or on another node), and reports whether it had one.
func liftLocal(e ruleEntry, key string) bool {
	if e.blocks == nil {
		return false
	}
	if b, ok := e.blocks.InfoAt(key, time.Now()); ok && e.clustered() {
		// the block as reports carry it: to the millisecond, rounded up
		lifted.remember(e.name, key, time.UnixMilli(b.Until.Add(time.Millisecond-1).UnixMilli()), time.Now())
	}
	return e.blocks.Lift(key)
}
