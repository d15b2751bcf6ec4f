package caddymodule

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// pendingRule is a rule's limiter and configuration, to be put in force
// when the config starts.
type pendingRule struct {
	name  string
	lim   *limiter.Limiter
	from  *limiter.Limiter // the running limiter whose keys lim adopts; nil if lim is it
	cfg   limiter.Config
	rule  ruleconfig.Rule // as configured, for the admin API
	stats *ruleStats
}

// registry holds every rule's limiter by name, process-wide: a reload
// provisions the new handlers while the old ones still serve, and both find
// the same counters here. A limiter is dropped when the last config that
// uses it is cleaned up.
var registry = &rules{byName: make(map[string]*sharedLimiter)}

// rules is the registry's type.
type rules struct {
	mu     sync.Mutex
	byName map[string]*sharedLimiter
}

// sharedLimiter is a limiter, the number of provisioned rules using it,
// and what the rule has decided since its name came into use.
type sharedLimiter struct {
	lim   *limiter.Limiter
	refs  int
	stats *ruleStats
	rule  ruleconfig.Rule // the configuration in force

	// What the last commit replaced, so that a config that fails to start
	// can put it back.
	owner     *App // the app whose commit put lim in force
	prevOwner *App // the app whose commit had put prev in force
	prev      *limiter.Limiter
	prevCfg   limiter.Config
	prevRule  ruleconfig.Rule

	committed bool // lim is in force (not only provisioned): shown by the admin API and metrics

	blocks   *limiter.Blocks // block_for's blocked keys (blocks.go); nil without
	blockCfg blockConfig     // what blocks was made for
	conc     *concurrency    // max_concurrent's requests in flight, made on first use (concurrency.go)

	overrides *limiter.Overrides // per-key factors set at runtime (overrides.go)
}

// acquire returns the limiter registered under name if it can keep its
// counters under cfg; else a successor that will adopt its keys (from),
// or a new limiter if there is none. Successors are registered by commit.
func (rs *rules) acquire(name string, cfg limiter.Config) (lim, from *limiter.Limiter, stats *ruleStats, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s, ok := rs.byName[name]
	if !ok {
		s = &sharedLimiter{stats: newRuleStats()}
		rs.byName[name] = s
	}
	s.refs++
	switch {
	case s.lim == nil:
		lim, err = limiter.New(cfg)
		s.lim = lim
	case s.lim.Keeps(cfg):
		return s.lim, nil, s.stats, nil
	default:
		lim, err = s.lim.Successor(cfg)
		from = s.lim
	}
	if err != nil {
		rs.releaseLocked(name)
		return nil, nil, nil, err
	}
	return lim, from, s.stats, nil
}

// addRef counts one more use of a name already acquired.
func (rs *rules) addRef(name string) {
	rs.mu.Lock()
	rs.byName[name].refs++
	rs.mu.Unlock()
}

// commit puts a starting config's rules in force, remembering what they
// replace.
func (rs *rules) commit(owner *App, pending []pendingRule) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, p := range pending {
		if s, ok := rs.byName[p.name]; ok {
			s.prevOwner, s.prev, s.prevCfg, s.prevRule = s.owner, s.lim, s.lim.Config(), s.rule
			s.owner, s.lim, s.rule, s.committed = owner, p.lim, p.rule, true
		}
		if p.from != nil {
			p.lim.Adopt(p.from) // the keys of the rule's previous layout
		} else {
			p.lim.Reconfigure(p.cfg) // always kept: acquire checked the layout
		}
	}
}

// revert puts back what owner's commit replaced, where owner is still the
// last to have committed: owner's config is being cleaned up without a
// newer config having taken over those rules, so either it failed to start
// (and the config before it is still running) or its rules are going away
// with it (and putting them back is harmless).
func (rs *rules) revert(owner *App) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, s := range rs.byName {
		if s.owner != owner {
			if s.prevOwner == owner && s.prev != nil {
				// owner's config is going away and a later one runs this
				// rule: nothing will be put back, so keep nothing of it
				s.prev, s.prevOwner, s.prevRule = nil, nil, ruleconfig.Rule{}
			}
			continue
		}
		if s.prev == s.lim {
			s.lim.Reconfigure(s.prevCfg) // same layout: the limits go back
		}
		s.lim, s.rule, s.owner, s.prev = s.prev, s.prevRule, nil, nil
	}
}

// release drops one use of rule name, and its counters with the last.
func (rs *rules) release(name string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.releaseLocked(name)
}

func (rs *rules) releaseLocked(name string) {
	if s, ok := rs.byName[name]; ok {
		s.refs--
		if s.refs <= 0 {
			delete(rs.byName, name)
		}
	}
}

// ruleEntry is a rule in the registry, as list gives it.
type ruleEntry struct {
	name   string
	lim    *limiter.Limiter
	stats  *ruleStats
	rule   ruleconfig.Rule
	blocks *limiter.Blocks // nil without block_for

	overrides *limiter.Overrides
}

// clustered is true for a rule with scope cluster, in a cluster.
func (e ruleEntry) clustered() bool { return e.lim.Config().Shares }

// forget forgets key in this process: its counters, its requests in
// flight, its place in the top keys, its block. found: the process had
// state for it; lifted: a block of it ended.
func (e ruleEntry) forget(key string) (found, lifted bool) {
	found = e.lim.Delete(key)
	if c := concurrencyIn(e); c != nil {
		found = c.inFlight.Forget(key) || found
	}
	e.stats.forget(key)
	lifted = liftLocal(e, key)
	return found || lifted, lifted
}

// list returns the rules in force, sorted by name.
func (rs *rules) list() []ruleEntry {
	rs.mu.Lock()
	out := make([]ruleEntry, 0, len(rs.byName))
	for name, s := range rs.byName {
		if s.lim != nil && s.committed {
			out = append(out, ruleEntry{name, s.lim, s.stats, s.rule, s.blocks, s.overrides})
		}
	}
	rs.mu.Unlock()
	slices.SortFunc(out, func(a, b ruleEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// get returns the rule in force named name.
func (rs *rules) get(name string) (ruleEntry, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s, ok := rs.byName[name]
	if !ok || s.lim == nil || !s.committed {
		return ruleEntry{}, false
	}
	return ruleEntry{name, s.lim, s.stats, s.rule, s.blocks, s.overrides}, true
}

// sweep frees idle keys of every rule, forgotten blocks, and expired
// overrides (logged).
func (rs *rules) sweep(now time.Time) {
	rs.mu.Lock()
	lims := make([]*limiter.Limiter, 0, len(rs.byName))
	var blocks []*limiter.Blocks
	overrides := map[string]*limiter.Overrides{}
	for name, s := range rs.byName {
		if s.overrides != nil {
			overrides[name] = s.overrides
		}
		if s.lim != nil {
			lims = append(lims, s.lim)
		}
		if s.blocks != nil {
			blocks = append(blocks, s.blocks)
		}
	}
	rs.mu.Unlock()
	for _, l := range lims {
		l.SweepAt(now)
	}
	for _, b := range blocks {
		b.SweepAt(now)
	}
	for name, o := range overrides {
		sweepOverrides(name, o, now)
	}
}
