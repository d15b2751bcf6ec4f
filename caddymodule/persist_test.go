package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// persistRule is a rule entry named name of 5 an hour, keyed as a test
// wants, with a new limiter and block_for 1m.
func persistRule(t *testing.T, name string) ruleEntry {
	t.Helper()
	lim, err := limiter.New(hourlyLimit(5))
	if err != nil {
		t.Fatal(err)
	}
	b, err := limiter.NewBlocks([]time.Duration{time.Minute}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ruleEntry{name: name, lim: lim, stats: newRuleStats(), rule: ruleWith(name, hourlyLimit(5)), blocks: b}
}

// storageKeys lists every key of st.
func storageKeys(t *testing.T, st snapshotStorage) []string {
	t.Helper()
	keys, err := st.List(context.Background(), "rate_limit", true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := instancePrefix()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, k := range keys {
		if snapshotObject(prefix, k) {
			files = append(files, k)
		}
	}
	return files
}

// allowN takes n units of key in e at now, and returns how many passed.
func allowN(e ruleEntry, key string, n int) int {
	ok := 0
	for range n {
		if e.lim.Allow(key, 1).Allowed {
			ok++
		}
	}
	return ok
}

// A rule's counters and blocks are written, then read back into the
// rule's new limiter by a new process (a new persister): 4 of 5 used
// before, 1 after; the block still runs.
func TestPersistRoundTrip(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	const name = "api/../v1 x" // a name that is no path
	e := persistRule(t, name)
	allowN(e, "k", 4)
	e.blocks.OffendAt("bad", time.Now())
	ps := &persister{rules: map[string]*ruleWrites{}}
	ps.write(ctx, st, []ruleEntry{e}, false, zap.NewNop())
	allowN(e, "j", 2) // a delta
	ps.write(ctx, st, []ruleEntry{e}, false, zap.NewNop())
	if ps.writes.Load() != 2 || ps.failures.Load() != 0 || ps.keysWritten.Load() != 2 {
		t.Fatalf("writes %d, failures %d, keys %d; want 2, 0, 2", ps.writes.Load(), ps.failures.Load(), ps.keysWritten.Load())
	}
	keys := storageKeys(t, st)
	if len(keys) != 3 {
		t.Fatalf("objects %q: want a full snapshot, a delta and the blocks", keys)
	}
	for _, k := range keys {
		if !strings.Contains(k, "/api%2F%2E%2E%2Fv1%20x") {
			t.Errorf("object %q: the rule's name is not escaped", k)
		}
	}

	next := persistRule(t, name)
	core, logs := observer.New(zap.InfoLevel)
	(&persister{rules: map[string]*ruleWrites{}}).restore(st, []ruleEntry{next}, zap.New(core))
	if got := allowN(next, "k", 5); got != 1 {
		t.Errorf("k: %d passed after the restore, want 1", got)
	}
	if got := allowN(next, "j", 5); got != 3 {
		t.Errorf("j: %d passed after the restore, want 3", got)
	}
	if _, blocked := next.blocks.BlockedAt("bad", time.Now()); !blocked {
		t.Error("the block did not survive")
	}
	if n := logs.FilterMessage("rate limit rule restored").Len(); n != 1 {
		t.Errorf("%d restore lines, want 1: %v", n, logs.All())
	}
}

// The first write of a process is a full snapshot of a new generation,
// and once it is stored the objects the process read at start are
// deleted; a rule gone has its objects deleted.
func TestPersistGenerations(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	e, gone := persistRule(t, "kept"), persistRule(t, "gone")
	allowN(e, "k", 1)
	allowN(gone, "k", 1)
	first := &persister{rules: map[string]*ruleWrites{}}
	first.write(ctx, st, []ruleEntry{e, gone}, false, zap.NewNop())
	before := storageKeys(t, st)

	next := persistRule(t, "kept")
	ps := &persister{rules: map[string]*ruleWrites{}}
	ps.restore(st, []ruleEntry{next}, zap.NewNop())
	ps.write(ctx, st, []ruleEntry{next}, false, zap.NewNop())
	after := storageKeys(t, st)
	if len(after) != 2 || !strings.Contains(after[0], "/blocks/kept") || !strings.Contains(after[1], "/rules/kept/") || after[1] == before[3] {
		t.Errorf("objects after the restart's first write: %q (before %q), want kept's blocks and a new full snapshot of kept", after, before)
	}
}

// A snapshot that cannot be read is a warning naming its storage key; the
// rule starts afresh and Caddy goes on.
func TestPersistCorrupt(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	e := persistRule(t, "r")
	allowN(e, "k", 5)
	(&persister{rules: map[string]*ruleWrites{}}).write(ctx, st, []ruleEntry{e}, false, zap.NewNop())
	for _, k := range storageKeys(t, st) {
		data, _ := st.Load(ctx, k)
		if err := st.Store(ctx, k, data[:len(data)/2]); err != nil {
			t.Fatal(err)
		}
	}
	next := persistRule(t, "r")
	core, logs := observer.New(zap.WarnLevel)
	(&persister{rules: map[string]*ruleWrites{}}).restore(st, []ruleEntry{next}, zap.New(core))
	if got := allowN(next, "k", 5); got != 5 {
		t.Errorf("%d passed after a corrupt snapshot, want 5 (afresh)", got)
	}
	warned := logs.FilterMessage("rate limit snapshot not restored; the rule starts afresh").All()
	if len(warned) != 1 || !strings.Contains(warned[0].ContextMap()["key"].(string), "/rules/r/") {
		t.Errorf("warnings: %v, want one naming the snapshot's key", logs.All())
	}
	if n := logs.FilterMessage("rate limit blocks not restored; the rule's blocks start afresh").Len(); n != 1 {
		t.Errorf("%d warnings of the blocks, want 1", n)
	}
}

// failingStorage fails every Store while down.
type failingStorage struct {
	snapshotStorage
	down bool
}

func (f *failingStorage) Store(ctx context.Context, key string, value []byte) error {
	if f.down {
		return errors.New("disk full")
	}
	return f.snapshotStorage.Store(ctx, key, value)
}

// A failed write is counted and logged, and the rule's next write is a
// full snapshot (the delta's keys were marked clean).
func TestPersistFailure(t *testing.T) {
	st := &failingStorage{snapshotStorage: &certmagic.FileStorage{Path: t.TempDir()}}
	ctx := context.Background()
	e := persistRule(t, "r")
	e.blocks = nil
	ps := &persister{rules: map[string]*ruleWrites{}}
	allowN(e, "a", 1)
	ps.write(ctx, st, []ruleEntry{e}, false, zap.NewNop())
	st.down = true
	allowN(e, "b", 1)
	core, logs := observer.New(zap.WarnLevel)
	ps.write(ctx, st, []ruleEntry{e}, false, zap.New(core))
	if ps.failures.Load() != 1 || ps.writes.Load() != 1 || logs.Len() != 1 {
		t.Fatalf("failures %d, writes %d, log lines %d; want 1, 1, 1", ps.failures.Load(), ps.writes.Load(), logs.Len())
	}
	st.down = false
	ps.write(ctx, st, []ruleEntry{e}, false, zap.NewNop())
	keys := storageKeys(t, st)
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "-000000") {
		t.Fatalf("objects %q: want one full snapshot", keys)
	}
	next := persistRule(t, "r")
	(&persister{rules: map[string]*ruleWrites{}}).restore(st, []ruleEntry{next}, zap.NewNop())
	for _, k := range []string{"a", "b"} {
		if got := allowN(next, k, 5); got != 4 {
			t.Errorf("%s: %d passed, want 4", k, got)
		}
	}
}

// Rules with store redis are not snapshotted: their state is Redis's.
func TestPersistSkipsRedis(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	e := persistRule(t, "r")
	e.rule.Store = ruleconfig.StoreRedis
	allowN(e, "a", 1)
	(&persister{rules: map[string]*ruleWrites{}}).write(context.Background(), st, []ruleEntry{e}, false, zap.NewNop())
	if keys := storageKeys(t, st); len(keys) != 0 {
		t.Errorf("objects %q of a store redis rule", keys)
	}
}

// latestGeneration picks the latest generation with a full snapshot, its
// deltas in order up to the first gap.
func TestLatestGeneration(t *testing.T) {
	dir := "p/rules/r/"
	name := func(gen int64, seq int) string { return fmt.Sprintf("%s%016x-%06d", dir, gen, seq) }
	keys := []string{name(1, 0), name(1, 1), name(2, 0), name(2, 2), name(2, 1), name(2, 4), name(3, 1), "p/rules/r/junk", "p/rules/r", "p/rules/rx/" + name(9, 0)[len(dir):]}
	got := latestGeneration(keys, dir)
	want := []string{name(2, 0), name(2, 1), name(2, 2)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for key, want := range map[string]bool{name(2, 0): true, "p/rules/r": false, "p/rules/r/junk": false, "p/blocks/r": true, "p/blocks": false, "p/blocks/r/x": false, "q/blocks/r": false} {
		if got := snapshotObject("p/", key); got != want {
			t.Errorf("snapshotObject(%q) = %v, want %v", key, got, want)
		}
	}
}

// BenchmarkServeHTTPPersist is BenchmarkServeHTTP's "with" on a rule
// holding 100,000 other keys, with persistence off and on: on, the
// rule's snapshot is written to a file storage every
// DefaultPersistInterval meanwhile (a full one, then deltas of the one
// key the requests change), as the App's loop writes it.
func BenchmarkServeHTTPPersist(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			rule := ruleconfig.Rule{Name: "persist-" + name, Limits: []ruleconfig.Limit{{Count: 1 << 31, Window: 3600e9}}}
			hd := testHandler(b, testApp(), rule)
			h := chain(hd)
			e := ruleEntry{name: rule.Name, lim: hd.rules[0].lim, stats: hd.rules[0].stats, rule: rule}
			for i := range 100_000 {
				e.lim.Allow(strconv.Itoa(i), 1)
			}
			if on {
				stop, done := make(chan struct{}), make(chan struct{})
				st := &certmagic.FileStorage{Path: b.TempDir()}
				ps := &persister{rules: map[string]*ruleWrites{}}
				go func() {
					defer close(done)
					t := time.NewTicker(DefaultPersistInterval)
					defer t.Stop()
					for {
						ps.write(context.Background(), st, []ruleEntry{e}, false, zap.NewNop())
						select {
						case <-stop:
							return
						case <-t.C:
						}
					}
				}()
				defer func() { close(stop); <-done }()
			}
			serveLoop(b, h)
		})
	}
}
