package limiter

import (
	"cmp"
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Blocks holds the blocked keys of one rule (block_for, block_reset): for
// each key, the end of its last block and how many blocks it has had
// (its offences). A key is blocked while now is before the end of its
// last block; its offences are remembered while its last block ended
// within the reset duration of now, and forgotten after (SweepAt frees
// the entry then). The n-th block of a key (n = 1 + the offences still
// remembered) lasts the n-th escalation duration, the last one repeating.
//
// Memory is bounded: past MaxKeys entries, the one whose block ended
// longest ago is forgotten first (a min-heap by end, per shard). A running
// block is never dropped for a new one: when every entry of the shard is a
// running block, the new block is refused (OffendAt reports no block,
// MergeAt false) and counted in Refused. A flood of offending keys thus
// cannot lift the blocks in force; the refused key is still limited by
// its rule's counters.
//
// It is safe for concurrent use: keys are split among shards of one mutex
// each (one shard below 2,048 entries, so a small bound is exact), and
// BlockedAt on a rule with no block running is one atomic load.
type Blocks struct {
	durations []int64 // ns, escalation
	reset     int64   // ns
	seed      maphash.Seed
	shards    []blockShard
	latest    atomic.Int64 // the latest block end ever set (ns): none runs at or after it
	refused   atomic.Uint64
	started   atomic.Uint64
	changes   atomic.Uint64 // blocks started, merged, lifted or forgotten (Changes)
}

// blockShard is a slice of the keys, under one lock.
type blockShard struct {
	mu       sync.Mutex
	keys     map[string]*blockEntry
	heap     []*blockEntry // min-heap by until: the first ended longest ago
	capacity int
	_        [40]byte // keeps neighbouring locks off one cache line
}

// blockEntry is one key's block state.
type blockEntry struct {
	key      string
	until    int64 // the end of the last block (unix ns)
	offences int
	idx      int // position in the shard's heap
}

// BlockedKey is a key's block, as the admin API shows it.
type BlockedKey struct {
	Key      string
	Until    time.Time // the end of its last block (in the past if none runs)
	Offences int       // blocks remembered (within the reset duration of the last one's end)
}

// DefaultBlockReset is how long a key's offences are remembered after its
// last block ended when NewBlocks is given a reset of 0 (block_reset).
const DefaultBlockReset = 24 * time.Hour

// NewBlocks returns the blocked keys of a rule whose n-th block lasts
// durations[n-1] (the last repeating), whose offences are forgotten reset
// after the last block ended (0: DefaultBlockReset), holding at most
// maxKeys entries (0: DefaultMaxKeys). Durations must be positive and at
// most MaxWindow, and there must be one at least.
func NewBlocks(durations []time.Duration, reset time.Duration, maxKeys int) (*Blocks, error) {
	if len(durations) == 0 {
		return nil, errors.New("block_for: at least one duration is required")
	}
	for _, d := range durations {
		if d <= 0 || d > MaxWindow {
			return nil, errors.New("block_for: each duration must be above 0 and at most " + MaxWindow.String())
		}
	}
	if reset < 0 || reset > MaxWindow {
		return nil, errors.New("block_reset: must be between 0 and " + MaxWindow.String())
	}
	if maxKeys < 0 {
		return nil, errors.New("blocks: the bound on keys must not be negative")
	}
	if reset == 0 {
		reset = DefaultBlockReset
	}
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	b := &Blocks{reset: int64(reset), seed: maphash.MakeSeed()}
	for _, d := range durations {
		b.durations = append(b.durations, int64(d))
	}
	n := 1
	for n < 64 && maxKeys/(n*2) >= 1024 {
		n *= 2
	}
	b.shards = make([]blockShard, n)
	for i := range b.shards {
		b.shards[i].keys = map[string]*blockEntry{}
		b.shards[i].capacity = maxKeys / n
		if i < maxKeys%n {
			b.shards[i].capacity++
		}
	}
	b.latest.Store(math.MinInt64)
	return b, nil
}

func (b *Blocks) shard(key string) *blockShard {
	if len(b.shards) == 1 {
		return &b.shards[0]
	}
	return &b.shards[maphash.String(b.seed, key)&uint64(len(b.shards)-1)]
}

// BlockedAt reports whether key is blocked at now, and until when. On a
// rule with no block running it is one atomic load; otherwise one shard
// lock and a map lookup. It allocates nothing.
func (b *Blocks) BlockedAt(key string, now time.Time) (until time.Time, blocked bool) {
	t := now.UnixNano()
	if t >= b.latest.Load() {
		return time.Time{}, false
	}
	s := b.shard(key)
	s.mu.Lock()
	e := s.keys[key]
	var u int64
	if e != nil {
		u = e.until
	}
	s.mu.Unlock()
	if e == nil || t >= u {
		return time.Time{}, false
	}
	return time.Unix(0, u), true
}

// OffendAt records that the rule denied a request of key at now. If key is
// blocked, it changes nothing and reports the block in force (isNew
// false). Otherwise it starts the key's n-th block, n being 1 + the
// offences remembered (its last block ended within the reset duration of
// now), and reports its end, n and isNew true. If the shard is full of
// running blocks, the block is refused: until is zero, offences 0, isNew
// false (see Refused).
func (b *Blocks) OffendAt(key string, now time.Time) (until time.Time, offences int, isNew bool) {
	t := now.UnixNano()
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if e != nil && t < e.until {
		return time.Unix(0, e.until), e.offences, false
	}
	n := 1
	if e != nil && t-e.until <= b.reset {
		n = e.offences + 1
	}
	u := addSpan(t, b.durations[min(n, len(b.durations))-1])
	if e == nil {
		if e = s.add(key, t, b.reset); e == nil {
			b.refused.Add(1)
			return time.Time{}, 0, false
		}
	}
	e.offences = n
	s.raise(e, u)
	b.raiseLatest(u)
	b.started.Add(1)
	b.changes.Add(1)
	return time.Unix(0, u), n, true
}

// MergeAt takes a block of key learnt from another node, ending at until
// with offences blocks: key keeps the later end and the higher offence
// count of its own and this one. It is idempotent and commutative: merging
// the same blocks in any order, any number of times, leaves the same
// state. A block whose end is more than the reset duration before now is
// ignored. It reports whether it changed anything (false also when the
// shard is full of running blocks: see Refused).
func (b *Blocks) MergeAt(key string, until time.Time, offences int, now time.Time) bool {
	t, u := now.UnixNano(), until.UnixNano()
	if t-u > b.reset || offences < 0 {
		return false
	}
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if e == nil {
		if e = s.add(key, t, b.reset); e == nil {
			b.refused.Add(1)
			return false
		}
	} else if t-e.until > b.reset {
		e.offences = 0 // forgotten, not swept yet
	}
	changed := false
	if offences > e.offences {
		e.offences, changed = offences, true
	}
	if u > e.until {
		s.raise(e, u)
		b.raiseLatest(u)
		changed = true
	}
	if changed {
		b.changes.Add(1)
	}
	return changed
}

// StartOf is when a block ending at until, a key's offences-th, began:
// until less the duration of that block (a cluster's node, told of a
// block, tells whether it began before a lift it saw).
func (b *Blocks) StartOf(until time.Time, offences int) time.Time {
	return until.Add(-time.Duration(b.durations[min(max(offences, 1), len(b.durations))-1]))
}

// Lift forgets key's block and offences (the admin API's DELETE), and
// reports whether it had any.
func (b *Blocks) Lift(key string) bool {
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if e == nil {
		return false
	}
	s.remove(e)
	b.changes.Add(1)
	return true
}

// InfoAt returns key's block state at now, if it has one: a block running,
// or offences still remembered.
func (b *Blocks) InfoAt(key string, now time.Time) (BlockedKey, bool) {
	t := now.UnixNano()
	s := b.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	if e == nil || t-e.until > b.reset {
		return BlockedKey{}, false
	}
	return BlockedKey{Key: key, Until: time.Unix(0, e.until), Offences: e.offences}, true
}

// ListAt returns the keys blocked at now, at most max of them (0: all),
// the latest block end first (then by key). It scans every shard.
func (b *Blocks) ListAt(now time.Time, max int) []BlockedKey {
	t := now.UnixNano()
	var out []BlockedKey
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for _, e := range s.heap {
			if e.until > t {
				out = append(out, BlockedKey{Key: e.key, Until: time.Unix(0, e.until), Offences: e.offences})
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y BlockedKey) int {
		if c := y.Until.Compare(x.Until); c != 0 {
			return c
		}
		return cmp.Compare(x.Key, y.Key)
	})
	if max > 0 && len(out) > max {
		out = out[:max:max]
	}
	return out
}

// SweepAt forgets the keys whose last block ended more than the reset
// duration before now, and returns how many.
func (b *Blocks) SweepAt(now time.Time) int {
	t := now.UnixNano()
	freed := sumShards(b.shards, func(s *blockShard) int { return s.sweep(t, b.reset) })
	if freed > 0 {
		b.changes.Add(1)
	}
	return freed
}

// Len is the number of keys held: blocked, or with offences not swept yet.
func (b *Blocks) Len() int {
	return sumShards(b.shards, (*blockShard).len)
}

// BlockedCountAt is the number of keys blocked at now (the blocked_keys
// gauge). It scans every entry.
func (b *Blocks) BlockedCountAt(now time.Time) int {
	t := now.UnixNano()
	if t >= b.latest.Load() {
		return 0
	}
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for _, e := range s.heap {
			if e.until > t {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Started is the number of blocks OffendAt started since NewBlocks (the
// blocks_total counter; blocks learnt by MergeAt are not counted).
func (b *Blocks) Started() uint64 { return b.started.Load() }

// Refused is the number of blocks refused since NewBlocks because a shard
// was full of running blocks.
func (b *Blocks) Refused() uint64 { return b.refused.Load() }

// raiseLatest makes latest at least u.
func (b *Blocks) raiseLatest(u int64) {
	for {
		l := b.latest.Load()
		if u <= l || b.latest.CompareAndSwap(l, u) {
			return
		}
	}
}

// addSpan is t+d, saturating.
func addSpan(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// len is the number of keys s holds.
func (s *blockShard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heap)
}

// sweep forgets the keys whose last block ended more than reset before
// t, and returns how many.
func (s *blockShard) sweep(t, reset int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	freed := 0
	for len(s.heap) > 0 && t-s.heap[0].until > reset {
		s.remove(s.heap[0])
		freed++
	}
	return freed
}

// add enters key, not held, with no block yet (its end below any time),
// making room if the shard is full: the entry whose block ended longest
// ago goes, unless it is still running (then every entry is, and add
// refuses: nil).
func (s *blockShard) add(key string, now, reset int64) *blockEntry {
	if len(s.heap) >= s.capacity {
		if len(s.heap) == 0 || s.heap[0].until > now {
			return nil
		}
		s.remove(s.heap[0])
	}
	e := &blockEntry{key: key, until: math.MinInt64, idx: len(s.heap)}
	s.keys[key] = e
	s.heap = append(s.heap, e)
	s.up(e.idx)
	return e
}

// raise moves e's end later, to u.
func (s *blockShard) raise(e *blockEntry, u int64) {
	e.until = u
	s.down(e.idx)
}

// remove forgets e.
func (s *blockShard) remove(e *blockEntry) {
	delete(s.keys, e.key)
	last := len(s.heap) - 1
	i := e.idx
	if i != last {
		s.swap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i != last {
		s.down(i)
		s.up(i)
	}
}

func (s *blockShard) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].idx, s.heap[j].idx = i, j
}

func (s *blockShard) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].until <= s.heap[i].until {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *blockShard) down(i int) {
	n := len(s.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && s.heap[c+1].until < s.heap[c].until {
			c++
		}
		if s.heap[i].until <= s.heap[c].until {
			return
		}
		s.swap(i, c)
		i = c
	}
}
