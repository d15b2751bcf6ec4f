package gossip

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Rule is a rule whose limits are shared by the cluster, as Sharing needs
// to know it.
type Rule struct {
	// Name is the rule's name, the same on every node; it travels as
	// KeyHash(Name).
	Name string
	// Window is the window of the limit that reports count in (the rule's
	// first): Entry.Limit is in units per Window.
	Window time.Duration
	// Demand returns the units asked of key (allowed or not) since its
	// last call, as limiter.Limiter.TakeDemand does.
	Demand func(key string) uint64
	// Used, if set, returns the units key holds in use at share on this
	// node (limiter.Limiter.UsedScaledAt): a window's count in the window
	// in force, which a share moving to another node does not carry, or a
	// bucket's units not yet refilled (or drained), which a long window
	// takes as long to give back (a bucket's from RescaleMinWindow on;
	// below it, its use is not asked). Reports carry it: a key is hot while
	// some node holds units of it, divided by use while no node asks for
	// it, and each node caps its share at what the others' use leaves of
	// the limit.
	Used func(key string, now time.Time, share float64) uint64
	// Rescale, if set (buckets), moves key's state from a share of from to
	// a share of to, keeping the units it holds in use
	// (limiter.Limiter.RescaleAt): a bucket's state is a time, which a
	// share scales with its rate, so that a key that emptied its bucket at
	// the cold share would stay empty at a larger share. Sharing calls it
	// whenever a key's share in force changes, with its lock held.
	Rescale func(key string, now time.Time, from, to float64)
	// Concurrent, if set, makes the rule a concurrency rule
	// (max_concurrent, see slots.go): it returns the most requests of key
	// in flight at once on this node since its last call, and the number
	// in flight now (limiter.InFlight.TakePeak). Use Slots and Refused for
	// its keys instead of Share; Window, Demand and Used are ignored.
	Concurrent func(key string) (peak, inFlight int64)
}

// RescaleMinWindow is the shortest window of a bucket rule whose state
// moves with its share (Rule.Rescale) and whose reports carry its use
// (Rule.Used). Left as a time, a bucket emptied at the cold share stays
// empty at a larger share: a key of limit 30 a day on one node of three
// admitted 11 there, and one of 30 every 10 s, asked at 2×L, 0.39×L
// (simulated). At 1 s the shares that follow its rate give 0.98×L either
// way, and moving units with every share there let a move of traffic hand
// the new node a full bucket while the old one still held its own (the
// simulator's 10-node move: 1.05×L in a 1 s window, 0.99 as a time).
const RescaleMinWindow = 2 * time.Second

// rescales is true for a bucket rule whose state moves with its share.
func (r Rule) rescales() bool { return r.Rescale != nil && r.Window >= RescaleMinWindow }

// usesReported is true for a rule whose reports carry its use: a window
// algorithm's, and a bucket's that rescales.
func (r Rule) usesReported() bool { return r.Used != nil && (r.Rescale == nil || r.rescales()) }

// SharingConfig configures a Sharing.
type SharingConfig struct {
	// Self is this node's name, as its reports carry it.
	Self string
	// Interval is the sync interval: how often Tick is called. Default
	// 100ms.
	Interval time.Duration
	// OnPartition is the partition policy. Default LocalShare.
	OnPartition PartitionPolicy
	// MaxKeys bounds the keys tracked (hot here or elsewhere); past it,
	// keys stay at the cold share. Default 10,000.
	MaxKeys int

	// OnBlock, if set, is called with every block that a report from
	// another node carries (blocks.go), for a rule shared here: rule is
	// KeyHash of its name, until the block's end (to the millisecond,
	// rounded up), offences the key's count of blocks. A block is repeated
	// in every report while it runs, so OnBlock sees it many times: it must
	// be idempotent (limiter.Blocks.MergeAt is) and quick. It is called by
	// Observe, with no lock of Sharing held, on the caller's goroutine
	// (Cluster's dispatch goroutine, never memberlist's receive path).
	OnBlock func(rule uint64, key string, until time.Time, offences int)
	// BlockBytes bounds the encoded blocks of one report. Default
	// DefaultBlockBytes (8 KiB, about 7 packets).
	BlockBytes int
	// MaxBlocks bounds the running blocks this node publishes. Default
	// DefaultMaxBlocks (10,000).
	MaxBlocks int
}

// Sharing is one node's side of quota sharing, between the request path
// and the sync loop. On the request path, Share gives a key's share of
// its limit (lock-free: an atomic load after a map lookup) and Track
// starts following a key that came near its share. Every interval, Tick
// measures the demand of the keys followed and returns the report to
// broadcast; Observe takes the reports of the other nodes. Keys that are
// neither near their share here nor hot elsewhere cost nothing: they get
// the cold share, (1+10%)/N.
//
// Its methods are safe for concurrent use.
type Sharing struct {
	cfg SharingConfig

	mu    sync.Mutex // guards table, seq and every tracked.smoothed
	table *ShareTable
	seq   uint64

	rules   atomic.Pointer[map[uint64]Rule] // by KeyHash(Name)
	keys    sync.Map                        // KeyID → *tracked
	tracked atomic.Int64                    // entries in keys
	cold    atomic.Uint64                   // float64 bits of the share of untracked keys
	coldN   atomic.Uint64                   // float64 bits of the part of N of untracked keys (slots.go)
	full    atomic.Uint64                   // Track calls refused: MaxKeys reached
	unknown atomic.Uint64                   // entries and blocks received for rules not shared here

	bmu    sync.Mutex             // guards the blocks published (blocks.go)
	pub    map[blockID]*published // running blocks this node made
	order  []blockID              // pub's blocks, in the order of the round
	fresh  []blockID              // published or changed since the last report
	cursor int                    // the round's next place in order

	blocksRefused atomic.Uint64 // PublishBlock calls refused
	blocksRecv    atomic.Uint64 // blocks received for rules shared here
}

// tracked is one key followed by this node.
type tracked struct {
	share atomic.Uint64          // float64 bits: the share in force
	key   atomic.Pointer[string] // the key, once seen on this node
	limit atomic.Uint32          // the key's global limit, units per window
	slots atomic.Int64           // a concurrency rule's cap in force, requests in flight
	// refused counts a concurrency rule's refusals since the last Tick.
	refused atomic.Uint64

	smoothed float64 // demand per interval, smoothed; under Sharing.mu
	hot      bool    // in the last report; under Sharing.mu
	// coldAt is when a concurrency key hot here went back to the cold
	// share (zero: it has not); under Sharing.mu.
	coldAt time.Time
}

// smoothing is the weight of the last interval's demand in the smoothed
// demand of a concurrency key (slots.go); a jump (more than doubling) or
// a fall (by more than half) is followed at once.
const smoothing = 0.2

// rateSmoothing is the weight of the last interval's demand in a rate
// key's smoothed demand; an interval that a Poisson count of the smoothed
// mean would make with a probability below surprise is followed at once.
// A node asked 4 times an interval (five nodes sharing 2×L of L = 100)
// has a smoothed demand whose noise is 17% of it at 0.2, and its share
// with it; that noise cost the fleet 5–10% of L (a sliding window pays a
// cut at once and a raise only as requests come; a bucket, less). At 0.1
// it is 11%, and a demand that moves by less than a surprise is followed
// in about a second (issue 23).
const rateSmoothing = 0.1

// NewSharing returns a Sharing with no rules, alone in its cluster.
func NewSharing(cfg SharingConfig) *Sharing {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSyncInterval
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 10_000
	}
	if cfg.BlockBytes <= 0 {
		cfg.BlockBytes = DefaultBlockBytes
	}
	if cfg.MaxBlocks <= 0 {
		cfg.MaxBlocks = DefaultMaxBlocks
	}
	s := &Sharing{cfg: cfg, pub: map[blockID]*published{}, table: NewShareTable(TableConfig{
		Self: cfg.Self, ClusterSize: 1, Interval: cfg.Interval, OnPartition: cfg.OnPartition, MaxKeys: cfg.MaxKeys,
	})}
	s.rules.Store(&map[uint64]Rule{})
	s.setCold(time.Time{})
	return s
}

// SetRules replaces the rules shared. Keys of rules no longer listed are
// forgotten at the next Tick.
func (s *Sharing) SetRules(rules []Rule) {
	m := make(map[uint64]Rule, len(rules))
	for _, r := range rules {
		m[KeyHash(r.Name)] = r
	}
	s.rules.Store(&m)
}

// SetClusterSize sets N, the number of nodes sharing the limits (alive or
// not yet known to be gone), from the membership.
func (s *Sharing) SetClusterSize(n int) {
	s.mu.Lock()
	s.table.SetClusterSize(max(n, 1))
	s.setCold(time.Time{})
	s.mu.Unlock()
}

// Share returns the share of key's limit in force on this node (multiply
// the limit by it), rule being KeyHash of the rule's name, and whether the
// key is tracked. limit is the key's global limit in units per window (the
// rule's first limit, times any geo or tier scale). Call Track after the
// decision if the key is not tracked and came near its share.
func (s *Sharing) Share(rule uint64, key string, limit uint32) (float64, bool) {
	return s.ShareAt(rule, key, limit, time.Time{})
}

// ShareAt is Share at now (zero: the clock's time, read only if needed):
// a key hot elsewhere and first seen here has its bucket moved from the
// cold share, at which this node decided it until then, to its share
// (Rule.Rescale).
func (s *Sharing) ShareAt(rule uint64, key string, limit uint32, now time.Time) (float64, bool) {
	v, ok := s.keys.Load(KeyID{rule, KeyHash(key)})
	if !ok {
		return math.Float64frombits(s.cold.Load()), false
	}
	t := v.(*tracked)
	if t.key.Load() == nil { // hot elsewhere, first seen here
		s.adopt(rule, t, key, limit, now)
	}
	return math.Float64frombits(t.share.Load()), true
}

// Track starts following key, which a decision left with less than half
// of its share: from the next Tick, its demand here is measured and, if
// it stays near its share, reported.
func (s *Sharing) Track(rule uint64, key string, limit uint32) {
	id := KeyID{rule, KeyHash(key)}
	if _, ok := s.keys.Load(id); ok {
		return
	}
	if !s.reserve() {
		s.full.Add(1)
		return
	}
	t := &tracked{}
	t.share.Store(s.cold.Load())
	t.slots.Store(s.coldSlots(limit))
	v, loaded := s.keys.LoadOrStore(id, t)
	if loaded {
		s.tracked.Add(-1)
	}
	if t = v.(*tracked); t.key.Load() == nil {
		s.adopt(rule, t, key, limit, time.Time{})
	}
}

// adopt records the key of a tracked entry, once, and starts its demand
// count from now (the limiter counted since the key was created). Its
// state, decided at the cold share until now, moves to the share in force
// (Rule.Rescale; now zero: the clock's time).
func (s *Sharing) adopt(rule uint64, t *tracked, key string, limit uint32, now time.Time) {
	t.limit.Store(limit)
	r, ok := (*s.rules.Load())[rule]
	if ok && r.Demand != nil {
		r.Demand(key)
	}
	if !t.key.CompareAndSwap(nil, &key) || !ok || !r.rescales() {
		return
	}
	if from, to := math.Float64frombits(s.cold.Load()), math.Float64frombits(t.share.Load()); from != to {
		if now.IsZero() {
			now = time.Now()
		}
		r.Rescale(key, now, from, to)
	}
}

// Tick measures the demand of the keys followed since the last Tick,
// updates their shares and returns this node's report, to broadcast, with
// the blocks it should carry (blocks.go). Call it every interval.
func (s *Sharing) Tick(now time.Time) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	rules := *s.rules.Load()
	s.seq++
	r := Report{Node: s.cfg.Self, Seq: s.seq, IntervalMillis: uint32(s.cfg.Interval.Milliseconds())}
	s.keys.Range(func(k, v any) bool {
		id, t := k.(KeyID), v.(*tracked)
		rule, ok := rules[id.Rule]
		if !ok {
			s.forget(id)
			return true
		}
		t.hot = false
		key := t.key.Load()
		if key == nil {
			if rule.Concurrent != nil {
				s.tickSlotsUnseen(&r, id, t) // slots.go
			}
			return true
		}
		if rule.Concurrent != nil {
			s.tickSlots(&r, id, t, rule, *key)
			return true
		}
		d := float64(rule.Demand(*key))
		switch {
		case t.smoothed == 0 || surprising(d, t.smoothed):
			t.smoothed = d
		default:
			t.smoothed += rateSmoothing * (d - t.smoothed)
		}
		if t.smoothed < 0.5 && d == 0 {
			// gone idle (while asked, a demand below one a interval
			// stays: zeroed, 2 an interval, smoothed from 0 to 0.4 was
			// zeroed again every interval, and held a node asked 20 a
			// second at the floor's share until a surprising interval)
			t.smoothed = 0
		}
		perInterval := float64(t.limit.Load()) * s.cfg.Interval.Seconds() / rule.Window.Seconds()
		share := math.Float64frombits(t.share.Load())
		used := uint64(0)
		if rule.usesReported() {
			used = rule.Used(*key, now, share)
		}
		// Near its share here, by rate or by use of the window in force
		// (a long window's key can use its share at a rate no interval
		// shows), or hot elsewhere and asked here or with a use: reported.
		near := t.smoothed >= 0.5*share*perInterval || float64(used) >= 0.5*share*float64(t.limit.Load())
		if near || (t.smoothed > 0 || used > 0) && s.table.keys[id] != nil {
			if len(r.Entries) < MaxEntries {
				t.hot = true
				r.Entries = append(r.Entries, Entry{
					Rule: id.Rule, Key: id.Key, Limit: t.limit.Load(), Demand: saturate(t.smoothed),
					Admitted: uint32(min(used, math.MaxUint32)),
				})
			}
		}
		return true
	})
	s.appendBlocks(&r, now)
	s.table.Observe(r, now)
	s.setCold(now)
	s.keys.Range(func(k, v any) bool {
		s.update(rules, k.(KeyID), v.(*tracked), now)
		return true
	})
	return r
}

// Observe takes a report (or a part of one) from another node: the
// shares it changes, cuts and raises, apply at once (raises wait only
// while some node is silent; see ShareTable). Only the keys whose demand
// or use the report changes are computed again here. Entries of rules
// not shared here are counted and ignored.
// The report's blocks go to SharingConfig.OnBlock first, with no lock held.
func (s *Sharing) Observe(r Report, now time.Time) {
	rules := *s.rules.Load()
	s.takeBlocks(&r, rules)
	entries := r.Entries[:0:0]
	for _, e := range r.Entries {
		if _, ok := rules[e.Rule]; ok {
			entries = append(entries, e)
		}
	}
	s.unknown.Add(uint64(len(r.Entries) - len(entries)))
	r.Entries = entries
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := make([]bool, len(r.Entries))
	if !s.table.observe(r, now, changed) {
		return
	}
	for i, e := range r.Entries {
		id := KeyID{e.Rule, e.Key}
		v, ok := s.keys.Load(id)
		if ok && !changed[i] {
			continue // the same demand and use: the same share
		}
		if !ok {
			if !s.reserve() {
				continue
			}
			t := &tracked{}
			t.limit.Store(e.Limit)
			t.share.Store(s.cold.Load())
			t.slots.Store(s.coldSlots(e.Limit))
			if v, ok = s.keys.LoadOrStore(id, t); ok {
				s.tracked.Add(-1)
			}
		}
		s.update(rules, id, v.(*tracked), now)
	}
}

// update sets a tracked key's share from the table, and forgets the key
// when it is hot nowhere (it then has the cold share). Under mu.
func (s *Sharing) update(rules map[uint64]Rule, id KeyID, t *tracked, now time.Time) {
	rule, ok := rules[id.Rule]
	if !ok {
		s.forget(id)
		return
	}
	if rule.Concurrent != nil {
		s.updateSlots(id, t, now)
		return
	}
	share, hot := s.table.Share(id, rule.Window, now)
	if !hot {
		share = math.Float64frombits(s.cold.Load()) // on_partition applied
	}
	if old := math.Float64frombits(t.share.Load()); old != share && rule.rescales() {
		if key := t.key.Load(); key != nil {
			rule.Rescale(*key, now, old, share)
		}
	}
	if !hot && !t.hot && t.smoothed == 0 {
		s.forget(id) // the cold share from now on
		return
	}
	t.share.Store(math.Float64bits(share))
}

// OthersUsed returns the units the other nodes last reported of key's
// use of its window in force (Entry.Admitted; a bucket's units not yet
// refilled), rule being KeyHash of the rule's name: 0 for a key hot
// nowhere (the others report no use then). With this node's own use, it
// is the fleet's count of the key as the reports tell it.
func (s *Sharing) OthersUsed(rule uint64, key string, now time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.table.keys[KeyID{rule, KeyHash(key)}]
	if ks == nil {
		return 0
	}
	g := s.table.gather(ks, now)
	used := 0.0
	for i, u := range s.table.uses {
		if i != g.self {
			used += u.used
		}
	}
	return uint64(used)
}

// reserve counts one more key tracked, if there is room.
func (s *Sharing) reserve() bool {
	if s.tracked.Add(1) > int64(s.cfg.MaxKeys) {
		s.tracked.Add(-1)
		return false
	}
	return true
}

func (s *Sharing) forget(id KeyID) {
	if _, ok := s.keys.LoadAndDelete(id); ok {
		s.tracked.Add(-1)
	}
}

// surprise is how unlikely an interval's demand must be, were the
// smoothed demand its Poisson mean, for the smoothed demand to follow it
// at once.
const surprise = 1e-3

// surprising is true if a Poisson count of the given mean (at least 0.5)
// is at most d, or at least d, with a probability below surprise: the
// demand changed, this is not noise.
func surprising(d, mean float64) bool {
	mean = max(mean, 0.5)
	if mean > 100 { // normal approximation: 3.1σ is a tail of 1e-3
		return math.Abs(d-mean) > 3.1*math.Sqrt(mean)
	}
	if d > mean+12*math.Sqrt(mean)+12 {
		return true
	}
	// P(X ≤ d) and P(X ≥ d) = 1 − P(X ≤ d−1), by the terms e^−m m^k / k!
	term, below := math.Exp(-mean), 0.0 // below: P(X ≤ k−1)
	for k := 0.0; k < d; k++ {
		below += term
		term *= mean / (k + 1)
	}
	return below+term < surprise || 1-below < surprise
}

func saturate(x float64) uint32 {
	return uint32(min(math.Round(x), math.MaxUint32))
}

// KeyShare is a tracked key's share, for inspection.
type KeyShare struct {
	Rule  uint64
	Key   string // empty if the key has not been seen on this node
	Hash  uint64
	Share float64
	Hot   bool // reported by this node in its last report
}

// SharingStats describes a Sharing, for inspection.
type SharingStats struct {
	Tracked   int     // keys tracked
	ColdShare float64 // the share of keys not tracked
	Live      int     // nodes heard from within the TTL, this one included
	Minority  bool    // this node sees no majority: on_partition applies
	Full      uint64  // keys not tracked because MaxKeys was reached
	// BlocksPublished is the running blocks this node publishes; BlocksRefused
	// the PublishBlock calls refused (a key too long, MaxBlocks reached);
	// BlocksReceived the blocks received for rules shared here, repeats
	// included.
	BlocksPublished int
	BlocksRefused   uint64
	BlocksReceived  uint64
	// UnknownRules counts entries and blocks received for rules not shared here:
	// nodes whose rules differ in name (a rule's derived name holds its
	// site address: name cluster rules when the nodes' sites differ).
	UnknownRules uint64
}

// Stats returns the current figures.
func (s *Sharing) Stats(now time.Time) SharingStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SharingStats{
		Tracked:   int(s.tracked.Load()),
		ColdShare: math.Float64frombits(s.cold.Load()),
		Live:      s.table.Live(now),
		Minority:  s.table.Minority(now),
		Full:      s.full.Load(),

		BlocksPublished: s.publishedBlocks(),
		BlocksRefused:   s.blocksRefused.Load(),
		BlocksReceived:  s.blocksRecv.Load(),

		UnknownRules: s.unknown.Load(),
	}
}

// Shares lists the keys tracked, at most limit of them (0: all).
func (s *Sharing) Shares(limit int) []KeyShare {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []KeyShare
	s.keys.Range(func(k, v any) bool {
		id, t := k.(KeyID), v.(*tracked)
		ks := KeyShare{Rule: id.Rule, Hash: id.Key, Share: math.Float64frombits(t.share.Load()), Hot: t.hot}
		if key := t.key.Load(); key != nil {
			ks.Key = *key
		}
		out = append(out, ks)
		return limit <= 0 || len(out) < limit
	})
	return out
}
