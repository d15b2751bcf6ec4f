package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/limiter"
)

// Of two changes of a key written to Redis, the later wins whichever is
// written first; a field that does not decode is skipped and counted; a
// prune deletes only the version it read.
func TestOverridesInRedis(t *testing.T) {
	_, c := start(t)
	s := newStore(t, c, Config{Limits: []limiter.Limit{hour}})
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	set := limiter.Override{Key: "k", Factor: 2, SetAt: t0, SetBy: "127.0.0.1:1"}
	del := limiter.Override{Key: "k", SetAt: t0.Add(time.Second), SetBy: "127.0.0.1:2", Removed: true}
	other := limiter.Override{Key: "o", Factor: 0, Expires: t0.Add(time.Hour), SetAt: t0}
	for _, w := range []struct {
		o    limiter.Override
		want bool
	}{{del, true}, {set, false}, {other, true}} {
		if ok, err := s.PutOverride(ctx, w.o); err != nil || ok != w.want {
			t.Fatalf("put %+v: %v %v, want %v", w.o, ok, err, w.want)
		}
	}
	c.HSet(ctx, s.overridesKey(), "junk", "not an override")
	es, bad, err := s.Overrides(ctx)
	if err != nil || bad != 1 || len(es) != 2 {
		t.Fatalf("read %+v, %d bad, %v", es, bad, err)
	}
	byKey := map[string]limiter.Override{}
	for _, e := range es {
		byKey[e.Key] = e
	}
	if byKey["k"] != del || byKey["o"] != other {
		t.Fatalf("read %+v", byKey)
	}
	// a prune of the read removal, after a later setting: nothing deleted
	later := limiter.Override{Key: "k", Factor: 3, SetAt: t0.Add(2 * time.Second)}
	if ok, _ := s.PutOverride(ctx, later); !ok {
		t.Fatal("a later setting not written")
	}
	if n, err := s.PruneOverrides(ctx, []limiter.Override{del, other}); err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want 1 (o)", n, err)
	}
	if es, _, _ = s.Overrides(ctx); len(es) != 1 || es[0] != later {
		t.Fatalf("after the prune: %+v", es)
	}
}
