package caddymodule

// Overrides: a key's factor set at runtime through the admin API (package
// admin's PUT …/keys/KEY/override), multiplying every limit of the rule
// for that key as a tier does (facts.scale, with the tier's, the
// country's and the network's factors); 0 refuses the key. A rule's
// overrides (a limiter.Overrides) are kept in the registry by the rule's
// name, so a reload keeps them, and in its snapshots (persist.go), so a
// restart does. Each change is logged, emitted as a Caddy event, and told
// to the cluster's other nodes (overrides_sync.go).

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// The Caddy events of overrides.
const (
	overrideSetEvent     = "rate_limit_override_set"
	overrideRemovedEvent = "rate_limit_override_removed"
)

// overridesFor returns the overrides of rule (acquired already), made
// with its first use, bounded by its max_overrides.
func (rs *rules) overridesFor(r ruleconfig.Rule) *limiter.Overrides {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s := rs.byName[r.Name]
	if s.overrides == nil {
		s.overrides = limiter.NewOverrides(r.MaxOverrides)
	} else {
		s.overrides.SetMax(r.MaxOverrides)
	}
	return s.overrides
}

// overrideScale is the factor key's override gives the rule at now: 1
// without one, at the cost of one atomic load while the rule has none.
func (ru *rule) overrideScale(key string, now time.Time) float64 {
	f, _ := ru.overrides.FactorAt(key, now)
	return f
}

// MaxOverrideKeyBytes bounds an override's key: a longer key is never
// one a rule keeps (a rule with scope cluster keeps the SHA-256 of it).
// A rule with key_hash keeps 64 hex digits.
const MaxOverrideKeyBytes = maxSharedKeyBytes

// ErrOverridesFull is the error of a new override past max_overrides.
var ErrOverridesFull = limiter.ErrOverridesFull

// checkOverrideKey refuses a key the rule could never keep.
func (r RuleState) checkOverrideKey(key string) error {
	switch {
	case key == "":
		return errors.New("the key is empty")
	case r.e.rule.KeyHash != "" && len(key) != 64:
		return fmt.Errorf("rule %q keeps its keys as their SHA-256 (key_hash): the key must be its 64 hex digits, as the admin API's keys show them, not %d bytes", r.e.name, len(key))
	case len(key) > MaxOverrideKeyBytes:
		return fmt.Errorf("key of %d bytes: rule %q keeps keys of at most %d bytes", len(key), r.e.name, MaxOverrideKeyBytes)
	}
	return nil
}

// Overrides are the rule's overrides in force, sorted by key.
func (r RuleState) Overrides() []limiter.Override {
	return r.e.overrides.ListAt(time.Now())
}

// MaxOverrides is the rule's bound of overrides.
func (r RuleState) MaxOverrides() int { return r.e.overrides.Max() }

// SetOverride puts an override of key in force at once: factor (finite,
// ≥ 0) until expiresIn from now (0: no end), set by by (the admin
// request's remote address). It is logged, emitted, and told to the
// cluster or stored in Redis. Past max_overrides it fails with
// ErrOverridesFull; a bad key or factor fails with the reason.
func (r RuleState) SetOverride(key string, factor float64, expiresIn time.Duration, by string) (limiter.Override, error) {
	if err := r.checkOverrideKey(key); err != nil {
		return limiter.Override{}, err
	}
	if expiresIn < 0 {
		return limiter.Override{}, fmt.Errorf("expires_in %s: must be positive", expiresIn)
	}
	now := time.Now()
	o := limiter.Override{Key: key, Factor: factor, SetAt: now, SetBy: by}
	if expiresIn > 0 {
		o.Expires = now.Add(expiresIn)
	}
	if err := r.e.overrides.Set(o); err != nil {
		return o, err
	}
	overrideChanged(r.e.name, o, "set")
	r.shareOverride(o)
	return o, nil
}

// RemoveOverride removes key's override, and reports whether it had one
// in force; removed by by.
func (r RuleState) RemoveOverride(key, by string) bool {
	now := time.Now()
	old, ok := r.e.overrides.Remove(key, now, by)
	if !ok {
		return false
	}
	old.SetBy = by
	overrideChanged(r.e.name, old, "removed")
	r.shareOverride(limiter.Override{Key: key, SetAt: now, SetBy: by, Removed: true})
	return true
}

// overrideChanged logs a change of an override at info (logger
// rate_limit) and emits its event: what is set, removed or expired.
func overrideChanged(rule string, o limiter.Override, what string) {
	app := activeApp.Load()
	if app == nil {
		return
	}
	fields := []zap.Field{
		zap.String("rule", rule),
		zap.String("key", shownKey(o.Key)),
		zap.Float64("factor", o.Factor),
		zap.String("who", o.SetBy),
		zap.String("what", what),
	}
	if !o.Expires.IsZero() {
		fields = append(fields, zap.String("expires", o.Expires.UTC().Format(time.RFC3339)))
	}
	app.logger.Info("rate limit override "+what, fields...)
	event := overrideSetEvent
	if what != "set" {
		event = overrideRemovedEvent
	}
	if app.events == nil || !app.events.ShouldEmit(event) {
		return
	}
	data := map[string]any{"rule": rule, "key": shownKey(o.Key), "factor": o.Factor, "who": o.SetBy, "what": what}
	if !o.Expires.IsZero() {
		data["expires"] = o.Expires.UTC().Format(time.RFC3339)
	}
	app.events.Emit(app.ctx, event, data)
}

// sweepOverrides forgets the overrides expired at now, logging each.
func sweepOverrides(name string, o *limiter.Overrides, now time.Time) {
	for _, e := range o.SweepAt(now) {
		overrideChanged(name, e, "expired")
	}
}
