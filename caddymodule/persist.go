package caddymodule

// Snapshots: every rule's counters and blocks, written to Caddy's storage
// every persist_interval and at a graceful stop, and read back when the
// process starts, so that a restart hands no client a fresh window. The
// encoding is package limiter's (AppendSnapshot, Restore); this file
// only names the objects, writes them and reads them. Nothing here runs
// on the request path.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/limiter"
)

// DefaultPersistInterval is how often the rules' state is written when
// persist_interval is not set: a process killed without a graceful stop
// loses at most this much counting.
const DefaultPersistInterval = time.Second

// persistTimeout bounds one write of every rule's snapshot, and the read
// at start.
const persistTimeout = 30 * time.Second

// maxDeltas is how many deltas a rule's full snapshot may have after it
// before the next write is a full one (also when the deltas' bytes pass
// the full one's): a restore reads at most this many objects a rule.
const maxDeltas = 256

// snapshotStorage is what of Caddy's storage (a certmagic.Storage) the
// snapshots use.
type snapshotStorage interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, path string, recursive bool) ([]string, error)
}

// persistUse is an app's persistence: the storage of its config and the
// interval (nil under persist off).
type persistUse struct {
	storage  snapshotStorage
	interval time.Duration
}

// snapshots is the process's writer of snapshots: like the registry, one
// for every config, so that a reload goes on with the objects the config
// before wrote.
var snapshots = &persister{rules: map[string]*ruleWrites{}}

// persister writes the rules' snapshots, one write at a time, and keeps
// what the metrics and the admin API show of them.
//
// Objects (keys of Caddy's storage), per instance (caddy.InstanceID, so
// that nodes sharing a storage each keep their own):
//
//	rate_limit/<instance>/rules/<rule>/<generation>-<seq>  a full snapshot (seq 0), then deltas
//	rate_limit/<instance>/blocks/<rule>                    the rule's blocks, whole
//	rate_limit/<instance>/overrides/<rule>                 the rule's per-key overrides, whole
//
// A generation is a full snapshot and the deltas after it. A rule's first
// write in a process is a full snapshot of a new generation, and so is
// the write after one that failed (its delta is lost, and the keys it
// held are marked clean), a write for a limiter that a reload replaced,
// and the write after maxDeltas deltas or deltas larger than the full
// snapshot; once it is stored, the objects of the generation before are
// deleted. A restore reads the latest generation with a full snapshot.
type persister struct {
	mu       sync.Mutex // one write at a time
	rules    map[string]*ruleWrites
	lastGen  int64    // the last generation started (Unix ns, unique)
	stale    []string // objects read at start, deleted once every rule has written anew
	restored bool     // the process's first commit read its snapshots
	entries  []ruleEntry

	// what the metrics and the admin API show
	writes, failures, keysWritten, bytesWritten atomic.Uint64
	lastSuccess, lastDuration                   atomic.Int64 // Unix ns; ns
	lastError                                   atomic.Pointer[string]
	lastLogged                                  atomic.Int64 // Unix ns of the last failure logged
}

// ruleWrites is what a rule's objects of the current generation are.
type ruleWrites struct {
	lim        *limiter.Limiter // the limiter they are snapshots of
	gen        int64
	seq        int
	names      []string // the generation's objects, the full snapshot first
	fullBytes  int
	deltaBytes int
	failed     bool // the last write failed: the next is full
	blocks     wholeWrites
	overrides  wholeWrites
}

// wholeWrites is what an object written whole (a rule's blocks, its
// overrides) was last written from.
type wholeWrites struct {
	at     uint64 // the source's Changes then
	stored bool
}

// persisted is true for a rule whose state is snapshotted: in-process
// counters (local or cluster scope), not store redis, whose state is
// Redis's.
func persisted(e ruleEntry) bool { return e.rule.Store != ruleconfig.StoreRedis }

// instancePrefix is this instance's prefix of the storage keys.
func instancePrefix() (string, error) {
	id, err := caddy.InstanceID()
	if err != nil {
		return "", fmt.Errorf("instance ID: %v", err)
	}
	return "rate_limit/" + id.String() + "/", nil
}

// storageName is a rule's name as one element of a storage key: letters,
// digits, '-' and '_' as they are, every other byte as %XX, so that no
// name makes a path ("/", "..") or collides with another.
func storageName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// objectName is the storage key of a rule's snapshot seq of generation gen.
func objectName(prefix, rule string, gen int64, seq int) string {
	return fmt.Sprintf("%srules/%s/%016x-%06d", prefix, storageName(rule), gen, seq)
}

// blocksName is the storage key of a rule's blocks.
func blocksName(prefix, rule string) string {
	return prefix + "blocks/" + storageName(rule)
}

// overridesName is the storage key of a rule's overrides.
func overridesName(prefix, rule string) string {
	return prefix + "overrides/" + storageName(rule)
}

// write writes a snapshot of every rule of entries: a delta, or a full one
// where one is due (see persister). With final (a graceful stop), rules
// missing from entries keep their objects; otherwise their objects are
// deleted (the rule is gone). Failures are counted, logged at most once
// a minute, and make the rule's next write a full one; they never reach
// a request.
func (ps *persister) write(ctx context.Context, st snapshotStorage, entries []ruleEntry, final bool, logger *zap.Logger) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	prefix, err := instancePrefix()
	if err != nil {
		ps.fail(logger, "", err)
		return
	}
	start := time.Now()
	ps.entries = entries
	seen := make(map[string]bool, len(entries))
	ok := true
	var buf []byte
	for _, e := range entries {
		if !persisted(e) {
			continue
		}
		seen[e.name] = true
		rw := ps.rules[e.name]
		if rw == nil {
			rw = &ruleWrites{}
			ps.rules[e.name] = rw
		}
		if !ps.writeRule(ctx, st, prefix, e, rw, &buf, logger) {
			ok = false
		}
	}
	if !final {
		for name, rw := range ps.rules {
			if !seen[name] {
				ps.deleteAll(ctx, st, append(rw.names, blocksName(prefix, name), overridesName(prefix, name)))
				delete(ps.rules, name)
			}
		}
		if ok && len(ps.stale) > 0 {
			ps.deleteStale(ctx, st)
		}
	}
	if ok {
		ps.writes.Add(1)
		ps.lastSuccess.Store(time.Now().UnixNano())
	}
	ps.lastDuration.Store(int64(time.Since(start)))
}

// writeRule writes e's snapshot (and its blocks and overrides, if they
// changed), and reports whether every write succeeded.
func (ps *persister) writeRule(ctx context.Context, st snapshotStorage, prefix string, e ruleEntry, rw *ruleWrites, buf *[]byte, logger *zap.Logger) bool {
	now := time.Now()
	full := rw.lim != e.lim || rw.failed || rw.seq > maxDeltas || rw.deltaBytes > rw.fullBytes
	b, stats := e.lim.AppendSnapshot((*buf)[:0], now, full)
	*buf = b
	ok := true
	if !stats.Empty() {
		gen, seq := rw.gen, rw.seq
		if full {
			gen, seq = ps.nextGen(now), 0
		}
		name := objectName(prefix, e.name, gen, seq)
		if err := st.Store(ctx, name, b); err != nil {
			rw.failed, ok = true, false
			ps.fail(logger, name, err)
		} else {
			ps.keysWritten.Add(uint64(stats.Keys))
			ps.bytesWritten.Add(uint64(len(b)))
			rw.failed = false
			if full {
				old := rw.names
				rw.lim, rw.gen, rw.seq, rw.names = e.lim, gen, 1, []string{name}
				rw.fullBytes, rw.deltaBytes = len(b), 0
				ps.deleteAll(ctx, st, old)
			} else {
				rw.seq++
				rw.names = append(rw.names, name)
				rw.deltaBytes += len(b)
			}
		}
	}
	if e.blocks != nil {
		ok = ps.writeWhole(ctx, st, blocksName(prefix, e.name), &rw.blocks, e.blocks.Changes(),
			func() []byte { return e.blocks.AppendSnapshot(nil, now) }, logger) && ok
	}
	if e.overrides != nil {
		ok = ps.writeWhole(ctx, st, overridesName(prefix, e.name), &rw.overrides, e.overrides.Changes(),
			func() []byte { return e.overrides.AppendSnapshot(nil, now) }, logger) && ok
	}
	return ok
}

// writeWhole writes the object name, encoded by encode, if its source has
// changed (changes, its Changes count) since w's last write, and reports
// whether the write, if any, succeeded.
func (ps *persister) writeWhole(ctx context.Context, st snapshotStorage, name string, w *wholeWrites, changes uint64, encode func() []byte, logger *zap.Logger) bool {
	if w.stored && changes == w.at {
		return true
	}
	if err := st.Store(ctx, name, encode()); err != nil {
		ps.fail(logger, name, err)
		return false
	}
	w.at, w.stored = changes, true
	return true
}

// nextGen is a new generation: the clock's Unix ns, or one more than the
// last if the clock has not moved on (or went back).
func (ps *persister) nextGen(now time.Time) int64 {
	ps.lastGen = max(now.UnixNano(), ps.lastGen+1)
	return ps.lastGen
}

// deleteAll deletes the objects names, ignoring failures (a leftover
// object of an older generation is never read: a restore reads the
// latest).
func (ps *persister) deleteAll(ctx context.Context, st snapshotStorage, names []string) {
	for _, name := range names {
		_ = st.Delete(ctx, name)
	}
}

// deleteStale deletes the objects read at start that no rule writes now.
func (ps *persister) deleteStale(ctx context.Context, st snapshotStorage) {
	owned := map[string]bool{}
	prefix, _ := instancePrefix()
	for name, rw := range ps.rules {
		for _, n := range rw.names {
			owned[n] = true
		}
		owned[blocksName(prefix, name)] = rw.blocks.stored
		owned[overridesName(prefix, name)] = rw.overrides.stored
	}
	var gone []string
	for _, name := range ps.stale {
		if !owned[name] {
			gone = append(gone, name)
		}
	}
	ps.deleteAll(ctx, st, gone)
	ps.stale = nil
}

// fail counts a failed write of the object name, and logs it at most once
// a minute.
func (ps *persister) fail(logger *zap.Logger, name string, err error) {
	ps.failures.Add(1)
	msg := err.Error()
	if name != "" {
		msg = name + ": " + msg
	}
	ps.lastError.Store(&msg)
	now := time.Now().UnixNano()
	if last := ps.lastLogged.Load(); now-last < int64(time.Minute) || !ps.lastLogged.CompareAndSwap(last, now) {
		return
	}
	logger.Warn("rate limit snapshot not written; counting goes on, the next write is a full snapshot",
		zap.String("key", name), zap.Error(err), zap.Uint64("failures", ps.failures.Load()))
}

// restore reads this instance's snapshots into the rules of entries whose
// limiters hold no key yet (a process's first config), once a process,
// and remembers entries as the rules a graceful stop writes (if no write
// came before it).
// A snapshot that cannot be read is a warning naming its storage key, and
// its rule starts afresh (or, for a bad delta, with what the objects
// before it held); it never fails the config. Snapshots of rules not in
// entries are left for the first write to delete.
func (ps *persister) restore(st snapshotStorage, entries []ruleEntry, logger *zap.Logger) (restored map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.entries = entries
	if ps.restored {
		return nil
	}
	ps.restored = true
	prefix, err := instancePrefix()
	if err != nil {
		logger.Warn("rate limit snapshots not read", zap.Error(err))
		return nil
	}
	keys, err := st.List(ctx, prefix, true)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("rate limit snapshots not read: listing the storage failed; every rule starts afresh", zap.String("prefix", prefix), zap.Error(err))
		}
		return nil
	}
	for _, k := range keys {
		if snapshotObject(prefix, k) { // List gives directories too: Delete would remove them whole
			ps.stale = append(ps.stale, k)
		}
	}
	now := time.Now()
	restored = map[string]bool{}
	for _, e := range entries {
		if !persisted(e) || e.lim.Len() > 0 {
			continue
		}
		restored[e.name] = ps.restoreRule(ctx, st, prefix, keys, e, now, logger)
	}
	return restored
}

// restoreRule reads rule e's latest generation, its blocks and its
// overrides, and reports whether its counters were restored.
func (ps *persister) restoreRule(ctx context.Context, st snapshotStorage, prefix string, keys []string, e ruleEntry, now time.Time, logger *zap.Logger) (restored bool) {
	names := latestGeneration(keys, prefix+"rules/"+storageName(e.name)+"/")
	if len(names) > 0 {
		r := limiter.NewRestore(now)
		read := 0
		for _, name := range names {
			data, err := st.Load(ctx, name)
			if err == nil {
				err = r.Add(data)
			}
			if err != nil {
				fresh := ""
				if read == 0 {
					fresh = "; the rule starts afresh"
				}
				logger.Warn("rate limit snapshot not restored"+fresh, zap.String("rule", e.name), zap.String("key", name), zap.Error(err))
				break
			}
			read++
		}
		if read > 0 {
			n, err := r.Into(e.lim)
			if err != nil {
				logger.Warn("rate limit snapshot not restored", zap.String("rule", e.name), zap.String("key", names[0]), zap.Error(err))
			} else {
				restored = true
				logger.Info("rate limit rule restored", zap.String("rule", e.name), zap.Int("keys", n),
					zap.Time("written", r.Written()), zap.Int("objects", read))
			}
		}
	}
	if e.blocks != nil {
		restoreWhole(ctx, st, blocksName(prefix, e.name), e.name, "blocks",
			func(data []byte) (int, error) { return e.blocks.RestoreSnapshot(data, now) }, logger)
	}
	if e.overrides != nil {
		restoreWhole(ctx, st, overridesName(prefix, e.name), e.name, "overrides", e.overrides.RestoreSnapshot, logger)
	}
	return restored
}

// restoreWhole reads the object name (a rule's blocks or overrides, what)
// into its source with restore, and logs what it took, or why it took
// nothing; a missing object is nothing to restore.
func restoreWhole(ctx context.Context, st snapshotStorage, name, rule, what string, restore func([]byte) (int, error), logger *zap.Logger) {
	data, err := st.Load(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		var n int
		if n, err = restore(data); err == nil {
			logger.Info("rate limit "+what+" restored", zap.String("rule", rule), zap.Int(what, n))
			return
		}
	}
	logger.Warn("rate limit "+what+" not restored; the rule's "+what+" start afresh", zap.String("rule", rule), zap.String("key", name), zap.Error(err))
}

// snapshotObject is true for a key of prefix that names a snapshot
// object: rules/<rule>/<generation>-<seq>, blocks/<rule> or
// overrides/<rule>.
func snapshotObject(prefix, key string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return false
	}
	for _, dir := range []string{"blocks/", "overrides/"} {
		if name, ok := strings.CutPrefix(rest, dir); ok {
			return name != "" && !strings.Contains(name, "/")
		}
	}
	rest, ok = strings.CutPrefix(rest, "rules/")
	rule, obj, ok2 := strings.Cut(rest, "/")
	_, _, isObj := parseObject(obj)
	return ok && ok2 && rule != "" && isObj
}

// parseObject reads an object's name, <generation>-<seq>.
func parseObject(name string) (gen int64, seq int, ok bool) {
	g, s, ok := strings.Cut(name, "-")
	gen, err1 := strconv.ParseInt(g, 16, 64)
	seq, err2 := strconv.Atoi(s)
	return gen, seq, ok && err1 == nil && err2 == nil && len(g) == 16 && len(s) == 6
}

// latestGeneration is the objects of the latest generation under dir
// that has a full snapshot (seq 0), in order: the full one, then the
// deltas from seq 1 up to the first missing one.
func latestGeneration(keys []string, dir string) []string {
	gens := map[int64]map[int]string{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, dir)
		if !ok {
			continue
		}
		gen, seq, ok := parseObject(rest)
		if !ok {
			continue
		}
		if gens[gen] == nil {
			gens[gen] = map[int]string{}
		}
		gens[gen][seq] = k
	}
	var order []int64
	for g, objs := range gens {
		if _, ok := objs[0]; ok {
			order = append(order, g)
		}
	}
	if len(order) == 0 {
		return nil
	}
	sort.Slice(order, func(i, j int) bool { return order[i] > order[j] })
	objs := gens[order[0]]
	var out []string
	for seq := 0; ; seq++ {
		name, ok := objs[seq]
		if !ok {
			return out
		}
		out = append(out, name)
	}
}

// persistLoop writes the rules' snapshots every interval until stop.
func (a *App) persistLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(a.persist.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
			snapshots.write(ctx, a.persist.storage, persistedRules(), false, a.logger)
			cancel()
		}
	}
}

// persistedRules is the rules in force.
func persistedRules() []ruleEntry { return registry.list() }

// finalWrite writes the last snapshots at a graceful stop: of the rules
// the last write saw (the handlers may have released theirs already).
func (a *App) finalWrite() {
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	snapshots.mu.Lock()
	entries := snapshots.entries
	snapshots.mu.Unlock()
	if now := registry.list(); len(now) >= len(entries) {
		entries = now
	}
	snapshots.write(ctx, a.persist.storage, entries, true, a.logger)
}

// SnapshotStatus is what the admin API shows of the snapshots.
type SnapshotStatus struct {
	Enabled      bool      `json:"enabled"`
	Interval     string    `json:"interval,omitempty"`
	LastSuccess  time.Time `json:"last_success,omitzero"`
	LastDuration string    `json:"last_duration,omitempty"`
	Writes       uint64    `json:"writes"`
	Errors       uint64    `json:"errors"`
	LastError    string    `json:"last_error,omitempty"`
	KeysWritten  uint64    `json:"keys_written"`
	BytesWritten uint64    `json:"bytes_written"`
}

// Snapshots is the state of the snapshots' writes, for the admin API.
func Snapshots() SnapshotStatus {
	app := activeApp.Load()
	if app == nil || app.persist == nil {
		return SnapshotStatus{}
	}
	ps := snapshots
	s := SnapshotStatus{
		Enabled:      true,
		Interval:     app.persist.interval.String(),
		Writes:       ps.writes.Load(),
		Errors:       ps.failures.Load(),
		KeysWritten:  ps.keysWritten.Load(),
		BytesWritten: ps.bytesWritten.Load(),
	}
	if t := ps.lastSuccess.Load(); t != 0 {
		s.LastSuccess = time.Unix(0, t).UTC()
		s.LastDuration = time.Duration(ps.lastDuration.Load()).String()
	}
	if e := ps.lastError.Load(); e != nil {
		s.LastError = *e
	}
	return s
}
