package limiter

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Overrides are a rule's per-key factors set at runtime (the admin API):
// a key with one has every limit of the rule multiplied by its factor, as
// a tier's is; 0 refuses the key. Reading is lock-free, and one atomic
// load when no override is in force: the map is copied on each change
// (changes are an operator's, rare) and published whole.
//
// Each entry carries its version, the time it was set (or removed): of
// two changes of a key, the later wins wherever they meet (another node's
// report, a snapshot), so a removal is kept as a tombstone for
// OverrideTombstone after it, and an older setting arriving later loses
// to it.
type Overrides struct {
	mu      sync.Mutex // one change at a time
	m       atomic.Pointer[map[string]Override]
	live    atomic.Int64 // entries not removed (expired ones too, until swept)
	max     atomic.Int64
	changes atomic.Uint64
}

// Override is one key's factor.
type Override struct {
	Key     string
	Factor  float64   // multiplies every limit of the rule for Key; 0 refuses it
	Expires time.Time // when it ends; zero: never
	SetAt   time.Time // when it was set or removed: its version
	SetBy   string    // who set or removed it (the admin request's remote address)
	Removed bool      // a removal, kept until OverrideTombstone after SetAt
}

// OverrideTombstone is how long a removal is remembered, so that an
// older setting of the key told later (a cluster's report) loses to it.
const OverrideTombstone = time.Hour

// DefaultMaxOverrides bounds a rule's overrides when max_overrides is not
// given.
const DefaultMaxOverrides = 10_000

// ErrOverridesFull is the error of a new override past the rule's bound.
var ErrOverridesFull = errors.New("max_overrides reached")

// NewOverrides returns an empty set of at most max overrides in force (0:
// DefaultMaxOverrides).
func NewOverrides(max int) *Overrides {
	o := &Overrides{}
	o.SetMax(max)
	o.m.Store(&map[string]Override{})
	return o
}

// SetMax changes the bound (0: DefaultMaxOverrides); overrides past a
// lowered bound stay until removed or expired, and no new one is taken.
func (o *Overrides) SetMax(max int) {
	if max <= 0 {
		max = DefaultMaxOverrides
	}
	o.max.Store(int64(max))
}

// Max is the bound.
func (o *Overrides) Max() int { return int(o.max.Load()) }

// FactorAt is key's factor at now, and whether an override is in force
// for it: one atomic load when the rule has none.
func (o *Overrides) FactorAt(key string, now time.Time) (float64, bool) {
	if o.live.Load() == 0 {
		return 1, false
	}
	e, ok := (*o.m.Load())[key]
	if !ok || e.Removed || !e.Expires.IsZero() && !now.Before(e.Expires) {
		return 1, false
	}
	return e.Factor, true
}

// Changes counts the changes since NewOverrides: a writer of snapshots
// skips o while it has not moved.
func (o *Overrides) Changes() uint64 { return o.changes.Load() }

// Len is the number of overrides held (expired ones until swept).
func (o *Overrides) Len() int { return int(o.live.Load()) }

// Set puts e in force (e.Removed false, e.SetAt its version), replacing
// the key's override; past the bound a new key is refused with
// ErrOverridesFull. A factor that is negative, NaN or infinite is refused.
func (o *Overrides) Set(e Override) error {
	if !(e.Factor >= 0) || math.IsInf(e.Factor, 1) {
		return errors.New("factor must be a finite number ≥ 0")
	}
	e.Removed = false
	o.mu.Lock()
	defer o.mu.Unlock()
	m := *o.m.Load()
	if old, ok := m[e.Key]; (!ok || old.Removed) && o.live.Load() >= o.max.Load() {
		return ErrOverridesFull
	}
	o.publish(func(m map[string]Override) { m[e.Key] = e })
	return nil
}

// Remove removes key's override at at, by by, and returns it; false if
// the key had none in force (an expired one is removed, and reported
// absent).
func (o *Overrides) Remove(key string, at time.Time, by string) (Override, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, ok := (*o.m.Load())[key]
	if !ok || old.Removed {
		return old, false
	}
	o.publish(func(m map[string]Override) { m[key] = Override{Key: key, SetAt: at, SetBy: by, Removed: true} })
	return old, old.Expires.IsZero() || at.Before(old.Expires)
}

// Merge takes changes made elsewhere (another node, a snapshot): each
// replaces the key's entry if it is later (SetAt) than the one held. A
// new setting past the bound is dropped. It returns the entries taken.
func (o *Overrides) Merge(es []Override) []Override {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := *o.m.Load()
	var took []Override
	taken := map[string]Override{} // took's, by key: later in es meets them
	live := o.live.Load()
	for _, e := range es {
		old, ok := taken[e.Key]
		if !ok {
			old, ok = m[e.Key]
		}
		if ok && !e.SetAt.After(old.SetAt) {
			continue
		}
		if !e.Removed && (!ok || old.Removed) {
			if live >= o.max.Load() {
				continue
			}
			live++
		} else if e.Removed && ok && !old.Removed {
			live--
		}
		took = append(took, e)
		taken[e.Key] = e
	}
	if len(took) > 0 {
		o.publish(func(m map[string]Override) {
			for _, e := range took {
				m[e.Key] = e
			}
		})
	}
	return took
}

// ListAt is the overrides in force at now, sorted by key.
func (o *Overrides) ListAt(now time.Time) []Override {
	var out []Override
	for _, e := range *o.m.Load() {
		if !e.Removed && (e.Expires.IsZero() || now.Before(e.Expires)) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Override) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// All is every entry, removals too, in no order: what a snapshot or a
// cluster's report carries.
func (o *Overrides) All() []Override {
	m := *o.m.Load()
	out := make([]Override, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	return out
}

// SweepAt forgets the overrides expired at now (returned, sorted by key)
// and the removals older than OverrideTombstone.
func (o *Overrides) SweepAt(now time.Time) (expired []Override) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var gone []string
	for k, e := range *o.m.Load() {
		switch {
		case e.Removed && now.Sub(e.SetAt) > OverrideTombstone:
			gone = append(gone, k)
		case !e.Removed && !e.Expires.IsZero() && !now.Before(e.Expires):
			gone = append(gone, k)
			expired = append(expired, e)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	o.publish(func(m map[string]Override) {
		for _, k := range gone {
			delete(m, k)
		}
	})
	slices.SortFunc(expired, func(a, b Override) int { return strings.Compare(a.Key, b.Key) })
	return expired
}

// publish applies change to a copy of the map and puts the copy in force,
// under o.mu.
func (o *Overrides) publish(change func(map[string]Override)) {
	old := *o.m.Load()
	m := make(map[string]Override, len(old)+1)
	for k, e := range old {
		m[k] = e
	}
	change(m)
	var live int64
	for _, e := range m {
		if !e.Removed {
			live++
		}
	}
	o.m.Store(&m)
	o.live.Store(live)
	o.changes.Add(1)
}
