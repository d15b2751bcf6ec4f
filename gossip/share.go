package gossip

import (
	"container/list"
	"slices"
	"time"
)

// partitionSlack bounds what a strict minority keeps under LocalShare, as
// a fraction of the limit: the most a partition adds to it.
const partitionSlack = 0.1

// usedSlack is how much of the limit a share may exceed what the other
// nodes' use of the window in force leaves (Entry.Admitted).
const usedSlack = 0.05

// PartitionPolicy is what a node that sees fewer than a majority of the
// cluster does with its shares (on_partition).
type PartitionPolicy int

// The policies.
const (
	// LocalShare keeps the shares of the nodes it sees: the last reports of
	// the nodes it no longer hears from do not expire, so the minority does
	// not take over their shares. A node that sees exactly half the
	// cluster keeps what it had (the other half is no majority either). A
	// node that sees fewer than half cannot tell the silent nodes from a
	// majority that reclaims their shares, its own included: it keeps
	// seen/N of its share, and the nodes it sees keep together at most
	// 2×seen/N×10% of the limit, so that a partition admits at most 1.1×L.
	LocalShare PartitionPolicy = iota
	// FailOpen gives every key a share of 1: each node of the minority
	// admits up to the whole limit.
	FailOpen
	// FailClosed denies on the minority: a node that sees no more than
	// half the cluster after nodes it knew went silent gives every key a
	// share of 0, so that only a majority admits and a partition admits at
	// most L (an even split admits nothing). Before any node went silent
	// (a start, a cluster still forming), shares are allocated between the
	// nodes seen, then multiplied by seen/N.
	FailClosed
)

// TableConfig configures a ShareTable.
type TableConfig struct {
	// Self is this node's name, as it appears in its own reports.
	Self string
	// ClusterSize is N, the number of nodes of the cluster (seen or not):
	// it sets the cold share and the majority. Zero: the number of nodes
	// ever heard from (self included). See SetClusterSize.
	ClusterSize int
	// Interval is the sync interval. Default: 100ms.
	Interval time.Duration
	// TTL is how long the reports of a silent node count. Default: three
	// intervals plus 500ms of failure detection.
	TTL time.Duration
	// RaiseDelay is how long a raise waits (cuts apply at once). Default:
	// one interval.
	RaiseDelay time.Duration
	// MaxKeys bounds the hot keys tracked; past it the least recently
	// reported one goes back to the cold share. Default: 10,000.
	MaxKeys int
	// ColdBuffer is the buffer of the cold share (1+ColdBuffer)/N.
	// Default: 0.1; negative: none.
	ColdBuffer float64
	// OnPartition is the partition policy. Default: LocalShare.
	OnPartition PartitionPolicy
	// Alloc tunes Allocate (its Capacity is set per key from the reports).
	Alloc AllocOptions
}

// KeyID names a key of a rule, by hashes.
type KeyID struct{ Rule, Key uint64 }

type nodeState struct {
	seen time.Time // when its last report arrived
	seq  uint64    // the Seq of its last report
}

type demandRec struct {
	seq  uint64  // the report it came in
	rate float64 // demand, units per second
	cap  float64 // the sender's limit, units per window (Entry.Limit)
	used float64 // the sender's use in the window in force, units (Entry.Admitted)
}

type keyState struct {
	id      KeyID
	reports map[string]demandRec
	elem    *list.Element

	// selfPrev is this node's demand in its report before the last
	// (units per second), selfAt when the last arrived: until RaiseDelay
	// has passed, the others may not have the last one, and this node
	// counts the lower of the two for itself.
	selfPrev     float64
	selfPrevUsed float64 // the same for its use (units)
	selfAt       time.Time
	hotAt        time.Time // when the key became hot here (the cold share caps it for RaiseDelay)

	// While some node is silent, raises wait (settle).
	applied    float64 // the share in force (−1: none yet)
	pending    float64 // a raise waiting
	pendingAt  time.Time
	hasPending bool
}

// ShareTable is one node's view of the cluster's demand for hot keys, and
// the shares it derives from it. Feed it every report received (its own
// too) with Observe; ask Share for the share of a key now. It is not safe
// for concurrent use.
//
// A key is hot while some live node's latest report carries it and the
// total demand reported is at least half the cold share of the limit
// (below that, no node could be hot under the cold share, and every node
// agrees the key is cold again). A key not hot has the cold share
// (1+ColdBuffer)/N.
//
// A node is live while its last report is younger than TTL; only the
// entries of a node's latest report count (a key missing from it is a
// demand of zero). Self is always live.
//
// Every node computes the same targets from the same reports, which reach
// them within a latency. A node counts its own demand as the others know
// it: for RaiseDelay after its report, the lower of that report's and the
// one before. A raise that its own demand makes thus waits until the
// others have heard it and cut; every other change (a cut, a raise that
// the others' reports make: they cut first, in their own reports) applies
// at once, so that the shares in force sum to at most 1 when the latency
// is below RaiseDelay, and stay close to 1 under noisy demand (waiting on
// every raise, and then taking the lowest target seen, made them sum to
// 0.93–0.97 with three nodes at 7 requests an interval each, issue 23).
// A key newly hot gets at most the cold share for RaiseDelay. While some
// node is silent (partition, death), raises still wait RaiseDelay and take
// the lowest target seen meanwhile: a window algorithm's silent nodes may
// still admit on their window's count.
type ShareTable struct {
	cfg   TableConfig
	nodes map[string]*nodeState
	keys  map[KeyID]*keyState
	lru   *list.List // front: most recently reported

	// returnedAt is when a node last came back: a report after a silence
	// longer than TTL (a heal, a restart). Under fail_closed raises wait
	// two raise delays after it.
	returnedAt time.Time
	liveAt     time.Time    // when live was counted (zero: to count again)
	live       int          // Live(liveAt)
	order      []string     // the nodes' names, sorted: the order of the sums
	demands    []NodeDemand // gather's buffers, and Share's and Slots'
	uses       []nodeUse
	shares     []NodeShare
}

// NewShareTable returns an empty table.
func NewShareTable(cfg TableConfig) *ShareTable {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSyncInterval
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 3*cfg.Interval + 500*time.Millisecond
	}
	if cfg.RaiseDelay <= 0 {
		cfg.RaiseDelay = cfg.Interval
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 10_000
	}
	if cfg.ColdBuffer == 0 {
		cfg.ColdBuffer = 0.1
	}
	cfg.ColdBuffer = max(cfg.ColdBuffer, 0)
	return &ShareTable{
		cfg:   cfg,
		nodes: map[string]*nodeState{cfg.Self: {}},
		order: []string{cfg.Self},
		keys:  map[KeyID]*keyState{},
		lru:   list.New(),
	}
}

// SetClusterSize sets N (from the membership).
func (t *ShareTable) SetClusterSize(n int) { t.cfg.ClusterSize = max(n, 0) }

func (t *ShareTable) clusterSize() int {
	if t.cfg.ClusterSize > 0 {
		return t.cfg.ClusterSize
	}
	return len(t.nodes)
}

// ColdShare is the share of a key that is not hot: (1+ColdBuffer)/N.
func (t *ShareTable) ColdShare() float64 {
	return min(1, (1+t.cfg.ColdBuffer)/float64(t.clusterSize()))
}

// ColdShareAt is the share of a key not hot at now, on_partition applied:
// on a node that sees no majority, 1 under FailOpen, and 0 under
// FailClosed once nodes it knew went silent; ColdShare otherwise.
func (t *ShareTable) ColdShareAt(now time.Time) float64 {
	if !t.Minority(now) {
		return t.ColdShare()
	}
	switch t.cfg.OnPartition {
	case FailOpen:
		return 1
	case FailClosed:
		if t.Live(now) < len(t.nodes) {
			return 0
		}
	}
	return t.ColdShare()
}

// Len is the number of hot keys tracked.
func (t *ShareTable) Len() int { return len(t.keys) }

// Observe records a report received at now (this node's own report too).
// A report older than the last one of its node (by Seq) is ignored, unless
// the node was silent for longer than TTL (it may have restarted). Parts
// of one report split to fit packets (SplitReport) share its Seq, and are
// all taken. It returns false if ignored.
func (t *ShareTable) Observe(r Report, now time.Time) bool {
	return t.observe(r, now, nil)
}

// observe is Observe, setting changed[i] (if changed is not nil) when
// entry i changes its sender's demand or use of the key (or is new): only
// such an entry can change this node's share, a cut or a raise, which
// applies at once.
func (t *ShareTable) observe(r Report, now time.Time, changed []bool) bool {
	t.liveAt = time.Time{}
	ns := t.nodes[r.Node]
	if ns == nil {
		ns = &nodeState{}
		t.nodes[r.Node] = ns
		i, _ := slices.BinarySearch(t.order, r.Node)
		t.order = slices.Insert(t.order, i, r.Node)
	} else if !ns.seen.IsZero() && r.Seq < ns.seq && now.Sub(ns.seen) <= t.cfg.TTL {
		return false
	}
	if !ns.seen.IsZero() && now.Sub(ns.seen) > t.cfg.TTL {
		t.returnedAt = now
	}
	ns.seen, ns.seq = now, r.Seq
	interval := float64(r.IntervalMillis) / 1000
	if interval <= 0 {
		interval = t.cfg.Interval.Seconds()
	}
	for i, e := range r.Entries {
		id := KeyID{e.Rule, e.Key}
		ks := t.keys[id]
		if ks == nil {
			ks = &keyState{id: id, reports: map[string]demandRec{}, applied: -1, hotAt: now}
			ks.elem = t.lru.PushFront(ks)
			t.keys[id] = ks
			for len(t.keys) > t.cfg.MaxKeys {
				old := t.lru.Back().Value.(*keyState)
				t.drop(old)
			}
		} else {
			t.lru.MoveToFront(ks.elem)
		}
		rec := demandRec{seq: r.Seq, rate: float64(e.Demand) / interval, cap: float64(e.Limit), used: float64(e.Admitted)}
		old, ok := ks.reports[r.Node]
		if changed != nil {
			changed[i] = !ok || old.seq+1 < r.Seq || rec.rate != old.rate || rec.used != old.used || rec.cap != old.cap
		}
		if r.Node == t.cfg.Self && (!ok || old.seq != r.Seq) {
			ks.selfPrev, ks.selfPrevUsed, ks.selfAt = 0, 0, now
			if ok && old.seq+1 == r.Seq {
				ks.selfPrev, ks.selfPrevUsed = old.rate, old.used
			}
		}
		ks.reports[r.Node] = rec
	}
	return true
}

func (t *ShareTable) drop(ks *keyState) {
	t.lru.Remove(ks.elem)
	delete(t.keys, ks.id)
}

// Live is the number of live nodes, self included.
func (t *ShareTable) Live(now time.Time) int {
	if !t.liveAt.IsZero() && now.Equal(t.liveAt) {
		return t.live
	}
	n := 0
	for name, ns := range t.nodes {
		if name == t.cfg.Self || now.Sub(ns.seen) <= t.cfg.TTL {
			n++
		}
	}
	t.liveAt, t.live = now, n
	return n
}

// Minority is true if this node sees fewer than a majority of the cluster.
func (t *ShareTable) Minority(now time.Time) bool {
	return 2*t.Live(now) <= t.clusterSize()
}

// Keys returns the keys tracked, hot or not (for a node to report its own
// demand on keys that are hot elsewhere).
func (t *ShareTable) Keys() []KeyID {
	out := make([]KeyID, 0, len(t.keys))
	for e := t.lru.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*keyState).id)
	}
	return out
}

// Share returns this node's share of key at now, window being the length
// of the window the reports' Limit is counted over, and whether the key is
// hot. A key not hot has the cold share (and is forgotten). Call it after
// each Observe that carried the key (cuts apply at once) and at least once
// per interval (raises apply after RaiseDelay).
//
// A hot key is divided by rate (its reports' Demand) while the fleet asks
// for it, and by use (their Admitted) while it does not: a window
// algorithm's count stays for the whole window, and a key used on one
// node keeps nearly the whole limit there while it is idle, instead of
// going back to the cold share, which a count above it would deny (a key
// of limit 30 a day on one node of three admitted 11).
func (t *ShareTable) Share(id KeyID, window time.Duration, now time.Time) (float64, bool) {
	ks := t.keys[id]
	if ks == nil {
		return t.ColdShare(), false
	}
	if t.Minority(now) && t.cfg.OnPartition == FailOpen {
		return 1, true
	}
	g := t.gather(ks, now)
	demands, uses := t.demands, t.uses
	n, live, minority, keepSilent, silent := g.n, g.live, g.minority, g.keepSilent, g.silent
	capacity := g.limit / window.Seconds()
	cold := t.ColdShare()
	usedTotal, othersUsed := 0.0, 0.0 // the nodes' use of the window in force
	for i, u := range uses {
		usedTotal += u.used
		if i != g.self {
			othersUsed += u.used
		}
	}
	hot := g.total >= cold/2*capacity // by rate
	if !g.current || capacity <= 0 || !hot && usedTotal == 0 {
		t.drop(ks)
		return cold, false
	}
	// The others may not have this node's last report yet: a demand (or a
	// use) that grew counts once they have, so that they cut before this
	// node raises.
	raising := now.Sub(ks.selfAt) < t.cfg.RaiseDelay
	if raising {
		demands[g.self].Demand = min(demands[g.self].Demand, ks.selfPrev)
	}
	known := 0.0 // the rates, with this node's as the others know it
	for _, d := range demands {
		known += d.Demand
	}
	opts := t.cfg.Alloc
	opts.Capacity = capacity
	byUse := known < cold/2*capacity && usedTotal > 0
	if byUse {
		// Idle everywhere (as the others know): the limit goes in
		// proportion to use, every node keeping its floor.
		known = 0
		for i := range demands {
			demands[i].Demand = uses[i].used
			if i == g.self && raising {
				demands[i].Demand = min(uses[i].used, ks.selfPrevUsed)
			}
			known += demands[i].Demand
		}
		opts.Capacity = 0
	}
	target := 0.0
	if cap(t.shares) < len(demands) {
		t.shares = make([]NodeShare, len(demands))
	}
	shares := allocateSorted(demands, opts, t.shares[:len(demands)])
	target = shares[g.self].Share
	switch {
	case known == 0: // this node's first report: the others know nothing yet
		target = cold
	case now.Sub(ks.hotAt) < t.cfg.RaiseDelay: // the others may still be at the cold share
		target = min(target, cold)
	}
	// A window's count stays with the node that made it: a share that
	// moves here must leave room for what the others used of the window
	// in force, or the cluster admits up to 1.3×L in the window of a move
	// (simulated, sliding_window). The cap applies after the raise delay,
	// which is for the others to cut first: as their windows slide, it
	// rises at once. The slack keeps the noise of the others' estimates,
	// always a little above their shares, from cutting steady shares.
	room := 1.0
	if othersUsed > 0 {
		room = max(0, 1-othersUsed/g.limit) + usedSlack
	}
	if minority && t.cfg.OnPartition == FailClosed {
		if silent > 0 {
			ks.applied, ks.hasPending = 0, false
			return 0, true
		}
		target *= float64(len(shares)) / float64(n)
	}
	if keepSilent && 2*live < n && silent > 0 {
		target *= t.minorityScale(shares, uses, live)
	}
	if silent == 0 {
		if t.cfg.OnPartition == FailClosed && ks.applied >= 0 && now.Sub(t.returnedAt) < 2*t.cfg.RaiseDelay {
			// Under fail_closed, no raise for two raise delays after a
			// node came back: the side that hears the other first would
			// raise before the other has heard it and cut (a healing
			// minority admitted 1.03×L in the heal's second on three
			// real nodes, issue 23). Under local_share a sliding window
			// fares worse for it (a 4|6 heal's worst 1 s window: 1.12×L
			// at once, 1.28×L held back), and the policy allows 1.1×L.
			target = min(target, ks.applied)
		}
		ks.applied, ks.hasPending = target, false
	} else {
		// A node went silent: a raise waits RaiseDelay, and then takes
		// the lowest target seen meanwhile, for the reclaimed shares of
		// a window algorithm's nodes still admitting on the other side of
		// a partition (without it, a 4|6 partition admitted 1.15×L in a
		// window with sliding_window).
		target = t.settle(ks, target, now)
	}
	return min(target, room), true
}

// nodeUse is what gather found of one node's report of a key, beside
// its demand.
type nodeUse struct {
	used     float64 // its use (Entry.Admitted); 0 if its report lacks the key
	reported bool    // its latest report carries the key
	alive    bool    // heard from within the TTL (self always)
}

// gathered is a key's reports as gather counts them.
type gathered struct {
	n, live, silent      int  // N, the nodes live, the nodes known and silent
	minority, keepSilent bool // fewer than a majority live; and LocalShare keeps the silent nodes' reports
	self                 int  // this node's place in the demands
	current              bool // some node counted reports the key
	limit                float64
	total                float64 // the demands' sum (units per second)
}

// gather collects the latest report of key ks from every node counted at
// now (the live ones, and the silent ones when a minority keeps their
// shares), in the order of the nodes' names, into t.demands (the rates)
// and t.uses, and forgets the reports of silent nodes not counted. Share
// and Slots start from it.
func (t *ShareTable) gather(ks *keyState, now time.Time) gathered {
	g := gathered{n: t.clusterSize(), live: t.Live(now), self: -1}
	g.minority = 2*g.live <= g.n
	g.keepSilent = g.minority && t.cfg.OnPartition == LocalShare
	demands, uses := t.demands[:0], t.uses[:0]
	for _, name := range t.order {
		ns := t.nodes[name]
		u := nodeUse{alive: name == t.cfg.Self || now.Sub(ns.seen) <= t.cfg.TTL}
		if !u.alive {
			g.silent++
		}
		if !u.alive && !g.keepSilent {
			continue
		}
		d := 0.0
		if rec, ok := ks.reports[name]; ok && rec.seq == ns.seq {
			d, u.used, u.reported = rec.rate, rec.used, true
			g.limit = max(g.limit, rec.cap)
			g.current = true
		} else if ok && !u.alive {
			delete(ks.reports, name)
		}
		if name == t.cfg.Self {
			g.self = len(demands)
		}
		g.total += d
		demands = append(demands, NodeDemand{name, d})
		uses = append(uses, u)
	}
	t.demands, t.uses = demands, uses
	return g
}

// minorityScale is what a node of a strict minority whose known peers
// went silent (under LocalShare) multiplies its share by, shares being
// the allocation over the nodes uses counts, live of them live: seen/N,
// and less if the nodes it sees would keep more than 2×seen/N×
// partitionSlack of the limit together. It cannot tell the silent nodes
// from a majority that has reclaimed their shares (and its own): so the
// cluster admits at most (1+partitionSlack)×L whatever the split.
func (t *ShareTable) minorityScale(shares []NodeShare, uses []nodeUse, live int) float64 {
	f := float64(live) / float64(t.clusterSize())
	seen := 0.0
	for i, s := range shares {
		if uses[i].alive {
			seen += s.Share
		}
	}
	if capped := 2 * f * partitionSlack; seen*f > capped {
		return f * capped / (seen * f)
	}
	return f
}

// settle applies the raise delay: a cut at once, a raise after RaiseDelay.
func (t *ShareTable) settle(ks *keyState, target float64, now time.Time) float64 {
	return t.settleAfter(ks, target, now, t.cfg.RaiseDelay)
}

// settleAfter is settle with a raise delay of delay.
func (t *ShareTable) settleAfter(ks *keyState, target float64, now time.Time, delay time.Duration) float64 {
	if ks.applied < 0 { // new: start from the cold share
		ks.applied = min(t.ColdShare(), target)
	}
	if target <= ks.applied {
		ks.applied, ks.hasPending = target, false
		return target
	}
	if !ks.hasPending {
		ks.pending, ks.pendingAt, ks.hasPending = target, now, true
	}
	ks.pending = min(ks.pending, target)
	if now.Sub(ks.pendingAt) >= delay {
		ks.applied, ks.hasPending = ks.pending, false
		if target > ks.applied {
			ks.pending, ks.pendingAt, ks.hasPending = target, now, true
		}
	}
	return ks.applied
}
