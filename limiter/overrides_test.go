package limiter

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"
)

// An override's factor is in force from Set to its expiry, to the
// nanosecond, and ends at Remove; a rule with none answers 1.
func TestOverridesFactorExpiryRemove(t *testing.T) {
	o := NewOverrides(0)
	if f, ok := o.FactorAt("k", base); ok || f != 1 {
		t.Fatalf("empty: %v %v", f, ok)
	}
	if err := o.Set(Override{Key: "k", Factor: 2.5, Expires: base.Add(time.Hour), SetAt: base, SetBy: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		at time.Duration
		f  float64
		ok bool
	}{{0, 2.5, true}, {time.Hour - ns, 2.5, true}, {time.Hour, 1, false}} {
		if f, ok := o.FactorAt("k", base.Add(s.at)); f != s.f || ok != s.ok {
			t.Errorf("at %v: %v %v, want %v %v", s.at, f, ok, s.f, s.ok)
		}
	}
	if f, ok := o.FactorAt("other", base); ok || f != 1 {
		t.Errorf("other key: %v %v", f, ok)
	}
	if got := o.SweepAt(base.Add(time.Hour)); len(got) != 1 || got[0].Key != "k" || o.Len() != 0 {
		t.Fatalf("sweep: %+v, %d left", got, o.Len())
	}
	if err := o.Set(Override{Key: "z", Factor: 0, SetAt: base}); err != nil {
		t.Fatal(err)
	}
	if f, ok := o.FactorAt("z", base.Add(1000*time.Hour)); !ok || f != 0 {
		t.Fatalf("factor 0: %v %v", f, ok)
	}
	if old, ok := o.Remove("z", base.Add(time.Minute), "me"); !ok || old.Factor != 0 {
		t.Fatalf("remove: %+v %v", old, ok)
	}
	if _, ok := o.Remove("z", base.Add(time.Minute), "me"); ok {
		t.Fatal("removed twice")
	}
	if _, ok := o.FactorAt("z", base.Add(time.Minute)); ok || o.Len() != 0 {
		t.Fatal("in force after Remove")
	}
}

// Past max_overrides a new key is refused; a key held is replaced, and a
// removal makes room.
func TestOverridesBound(t *testing.T) {
	o := NewOverrides(3)
	for i := range 3 {
		if err := o.Set(Override{Key: strconv.Itoa(i), Factor: 2, SetAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Set(Override{Key: "3", Factor: 2, SetAt: base}); !errors.Is(err, ErrOverridesFull) {
		t.Fatalf("4th: %v", err)
	}
	if err := o.Set(Override{Key: "0", Factor: 5, SetAt: base}); err != nil {
		t.Fatalf("replace: %v", err)
	}
	o.Remove("1", base, "")
	if err := o.Set(Override{Key: "3", Factor: 2, SetAt: base}); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
	if got := o.Merge([]Override{{Key: "4", Factor: 2, SetAt: base.Add(time.Second)}}); len(got) != 0 {
		t.Fatalf("merge past the bound took %+v", got)
	}
	for _, f := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := o.Set(Override{Key: "0", Factor: f, SetAt: base}); err == nil {
			t.Errorf("factor %v taken", f)
		}
	}
	if got := len(o.ListAt(base)); got != 3 {
		t.Fatalf("%d listed", got)
	}
}

// Of two changes of a key, the later wins, whichever arrives first: a
// removal is not undone by an older setting told later.
func TestOverridesMergeVersions(t *testing.T) {
	o := NewOverrides(0)
	set := Override{Key: "k", Factor: 3, SetAt: base}
	del := Override{Key: "k", SetAt: base.Add(time.Second), Removed: true}
	if got := o.Merge([]Override{del}); len(got) != 1 {
		t.Fatalf("removal not kept: %+v", got)
	}
	if got := o.Merge([]Override{set}); len(got) != 0 {
		t.Fatalf("older setting won: %+v", got)
	}
	if _, ok := o.FactorAt("k", base.Add(time.Second)); ok {
		t.Fatal("in force")
	}
	later := Override{Key: "k", Factor: 4, SetAt: base.Add(2 * time.Second)}
	if got := o.Merge([]Override{later, later}); len(got) != 1 {
		t.Fatalf("later setting: %+v", got)
	}
	if f, _ := o.FactorAt("k", base.Add(2*time.Second)); f != 4 {
		t.Fatalf("factor %v", f)
	}
	o.SweepAt(base.Add(time.Second + OverrideTombstone + ns)) // the setting stays
	if f, _ := o.FactorAt("k", base.Add(3*time.Second)); f != 4 {
		t.Fatalf("swept a setting: %v", f)
	}
}

// A snapshot reads back every entry, removals and versions too; a damaged
// one changes nothing.
func TestOverridesSnapshot(t *testing.T) {
	o := NewOverrides(0)
	o.Set(Override{Key: "a", Factor: 0.5, Expires: base.Add(time.Hour), SetAt: base, SetBy: "127.0.0.1:5"})
	o.Set(Override{Key: "b", Factor: 0, SetAt: base, SetBy: "x"})
	o.Remove("b", base.Add(time.Second), "y")
	data := o.AppendSnapshot(nil, base)
	p := NewOverrides(0)
	if n, err := p.RestoreSnapshot(data); err != nil || n != 2 {
		t.Fatalf("restore: %d %v", n, err)
	}
	got := p.ListAt(base)
	if len(got) != 1 || got[0] != (*o.m.Load())["a"] {
		t.Fatalf("restored %+v", got)
	}
	if p.Merge([]Override{{Key: "b", Factor: 9, SetAt: base}}) != nil {
		t.Fatal("the restored removal lost to an older setting")
	}
	data[len(data)-5] ^= 1
	q := NewOverrides(0)
	if _, err := q.RestoreSnapshot(data); !errors.Is(err, ErrSnapshot) || q.Len() != 0 {
		t.Fatalf("damaged: %v, %d", err, q.Len())
	}
}

// Reading overrides never panics and refuses what Set would.
func FuzzReadOverrides(f *testing.F) {
	f.Add(AppendOverrides(nil, []Override{{Key: "k", Factor: 2, SetAt: base}}, base))
	f.Add(AppendOverrides(nil, []Override{{Key: "k", Factor: -1, SetAt: base}}, base))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ReadOverrides(data)
		if err != nil {
			return
		}
		for _, e := range es {
			if !(e.Factor >= 0) || math.IsInf(e.Factor, 1) {
				t.Fatalf("factor %v read", e.Factor)
			}
		}
	})
}
