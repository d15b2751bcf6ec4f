package gossip

import (
	"math"
	"time"
)

// Concurrency rules (max_concurrent N) share N over the fleet as rate
// rules share their limit, with these differences:
//
//   - The unit is a request in flight, not a request per window. A node's
//     demand for a key is the most requests of it in flight at once on
//     the node over the interval, plus the requests it refused: each
//     wanted a place at that moment. Reports carry it in Entry.Demand,
//     N in Entry.Limit, and the requests in flight now in Entry.Admitted.
//   - A cut does not end the requests in flight: a node whose cap falls
//     from 20 to 5 still holds 20 until they end. Every node therefore
//     caps its own at N minus what the others hold or may admit: the sum
//     over the others of the larger of their requests in flight and their
//     cap. A node above its cap admits nothing, so its count can only
//     fall from the one reported; while it drains, the others wait. There
//     is no slack as for windows (usedSlack): counts are exact. A node
//     that follows a key reports it every interval, with no demand if it
//     has none; one that has not reported it may not follow it yet and
//     admit at its cold cap, so the others count its cold cap too.
//   - Caps are whole requests. Every node computes the same shares from
//     the same reports, so it computes the same whole caps for all the
//     nodes: floor(N × share) each, and the requests left over (N minus
//     the floors) to the largest remainders, ties in an order rotated by
//     the key's hash. They sum to N. A key that is not hot gets
//     floor(N/n) on each of n nodes: never more than N together, but 0
//     when N < n, until the key's first refusal makes it hot (a cap of
//     at least 1 everywhere would admit n > N at once).
//   - A silent node's share is reclaimed after the TTL as for rates, and
//     its requests in flight stop counting: a dead node holds none; a
//     partitioned one may, which on_partition bounds as for rates.

// Slots returns this node's cap on key's requests in flight, for the
// concurrency rule rule (KeyHash of its name), n being the key's global
// max_concurrent after any tier or geo scale; and whether the key is
// tracked. Pass the cap to limiter.InFlight.AcquireScaled. After the
// acquire, call Refused on a refusal, and Track when an admission left
// the key with at least half its cap in flight and the key is not tracked.
// Like Share, it is lock-free: a map lookup and an atomic load.
func (s *Sharing) Slots(rule uint64, key string, n uint32) (capSlots int64, isTracked bool) {
	v, ok := s.keys.Load(KeyID{rule, KeyHash(key)})
	if !ok {
		return s.coldSlots(n), false
	}
	t := v.(*tracked)
	if t.key.Load() == nil { // hot elsewhere, first seen here
		s.adopt(rule, t, key, n, time.Time{})
	}
	return t.slots.Load(), true
}

// Refused records that a concurrency rule refused a request of key (at
// its cap): it counts in the key's demand, and an untracked key is
// tracked from now.
func (s *Sharing) Refused(rule uint64, key string, n uint32) {
	v, ok := s.keys.Load(KeyID{rule, KeyHash(key)})
	if !ok {
		s.Track(rule, key, n)
		if v, ok = s.keys.Load(KeyID{rule, KeyHash(key)}); !ok {
			return // MaxKeys reached
		}
	}
	v.(*tracked).refused.Add(1)
}

// coldSlots is the cap of a key not tracked: its part of n, rounded down.
func (s *Sharing) coldSlots(n uint32) int64 {
	return int64(math.Floor(float64(n)*math.Float64frombits(s.coldN.Load()) + 1e-9))
}

// setCold sets the shares of keys not tracked (the zero time: whatever
// the partition), under mu or before s is shared.
func (s *Sharing) setCold(now time.Time) {
	if now.IsZero() {
		s.cold.Store(math.Float64bits(s.table.ColdShare()))
		s.coldN.Store(math.Float64bits(s.table.coldSlotShare(time.Time{})))
		return
	}
	s.cold.Store(math.Float64bits(s.table.ColdShareAt(now)))
	s.coldN.Store(math.Float64bits(s.table.coldSlotShare(now)))
}

// tickSlots measures a concurrency key's demand for Tick and reports it
// if it is near its cap here or hot elsewhere. Under mu.
func (s *Sharing) tickSlots(r *Report, id KeyID, t *tracked, rule Rule, key string) {
	peak, inFlight := rule.Concurrent(key)
	d := float64(max(peak, inFlight, 0)) + float64(t.refused.Swap(0))
	if d > 2*t.smoothed+5 || 2*d+5 < t.smoothed {
		t.smoothed = d
	} else {
		t.smoothed += smoothing * (d - t.smoothed)
	}
	if t.smoothed < 0.5 {
		t.smoothed = 0
	}
	// It keeps what it holds in its demand (the smoothing lags a rise).
	demand := max(t.smoothed, float64(inFlight))
	// A key hot anywhere is reported by every node that follows it, with
	// no demand if it has none: the others then know this node caps it by
	// the shares (not at its cold cap) and count nothing for it.
	near := demand > 0 && 2*demand >= float64(t.slots.Load())
	if near || s.table.keys[id] != nil {
		if len(r.Entries) < MaxEntries {
			t.hot = true
			r.Entries = append(r.Entries, Entry{
				Rule: id.Rule, Key: id.Key, Limit: t.limit.Load(), Demand: saturate(demand),
				Admitted: uint32(min(max(inFlight, 0), math.MaxUint32)),
			})
		}
	}
}

// tickSlotsUnseen reports a concurrency key hot elsewhere that no
// request of this node has asked for yet (it follows the key by its hash
// alone): with no demand and none in flight, so that the others know it
// caps the key by the shares and leave it no cold cap. Under mu.
func (s *Sharing) tickSlotsUnseen(r *Report, id KeyID, t *tracked) {
	if s.table.keys[id] == nil || len(r.Entries) >= MaxEntries {
		return
	}
	t.hot = true
	r.Entries = append(r.Entries, Entry{Rule: id.Rule, Key: id.Key, Limit: t.limit.Load()})
}

// updateSlots sets a tracked concurrency key's cap from the table, and
// forgets the key when it is hot nowhere. Under mu.
func (s *Sharing) updateSlots(id KeyID, t *tracked, now time.Time) {
	capSlots, hot := s.table.Slots(id, t.limit.Load(), now)
	if hot {
		t.coldAt = time.Time{}
		t.slots.Store(capSlots)
		return
	}
	if !t.hot && t.smoothed == 0 {
		s.forget(id)
		return
	}
	// Back to the cold cap; a rise to it waits as a raise does, so that
	// the others, which counted this node at its hot cap, see it report
	// no more and leave it the cold cap's room first.
	capSlots = s.coldSlots(t.limit.Load())
	if old := t.slots.Load(); capSlots > old {
		if t.coldAt.IsZero() {
			t.coldAt = now
		}
		if now.Sub(t.coldAt) < s.raiseDelay()+s.cfg.Interval {
			capSlots = old
		}
	}
	t.slots.Store(capSlots)
}

// coldSlotShare is the part of N of a concurrency key not hot at now
// (the zero time: whatever the partition): 1/n, where the rate rules'
// cold share adds a buffer the whole caps cannot afford; on_partition as
// ColdShareAt.
func (t *ShareTable) coldSlotShare(now time.Time) float64 {
	if !now.IsZero() {
		if c := t.ColdShareAt(now); c != t.ColdShare() {
			return c // fail_open's 1 or fail_closed's 0
		}
	}
	return 1 / float64(t.clusterSize())
}

// Slots returns this node's cap on a concurrency key's requests in flight
// at now, and whether the key is hot; limit is the key's N here, for a
// key not hot (a hot key's N is the largest reported). The reports'
// Demand are requests in flight wanted, their Admitted the requests in
// flight. Call it as Share. A key not hot gets floor(N/n) (and is
// forgotten).
func (t *ShareTable) Slots(id KeyID, limit uint32, now time.Time) (int64, bool) {
	ks := t.keys[id]
	cold := func() int64 {
		return int64(math.Floor(float64(limit)*t.coldSlotShare(now) + 1e-9))
	}
	if ks == nil {
		return cold(), false
	}
	g := t.gather(ks, now)
	demands, uses := t.demands, t.uses
	n, live, minority, keepSilent, silent, self := g.n, g.live, g.minority, g.keepSilent, g.silent, g.self
	iv := t.cfg.Interval.Seconds()
	nSlots, total := g.limit, 0.0
	for i := range demands {
		// what it holds is wanted too
		demands[i].Demand = max(demands[i].Demand, uses[i].used/iv)
		total += demands[i].Demand
	}
	capacity := nSlots / iv
	if !g.current || capacity <= 0 || total < t.ColdShare()/2*capacity {
		t.drop(ks)
		return cold(), false
	}
	if minority && t.cfg.OnPartition == FailOpen {
		return int64(nSlots), true
	}
	if minority && t.cfg.OnPartition == FailClosed && silent > 0 {
		ks.applied = 0
		return int64(t.settle(ks, 0, now)), true
	}
	opts := t.cfg.Alloc
	opts.Capacity = capacity
	if cap(t.shares) < len(demands) {
		t.shares = make([]NodeShare, len(demands))
	}
	shares := allocateSorted(demands, opts, t.shares[:len(demands)])
	caps := make([]int64, len(shares))
	switch {
	case minority && t.cfg.OnPartition == FailClosed: // no node went silent yet
		f := float64(len(shares)) / float64(n)
		for i := range shares {
			caps[i] = int64(math.Floor(shares[i].Share*f*nSlots + 1e-9))
		}
	case keepSilent && 2*live < n && silent > 0:
		f := t.minorityScale(shares, uses, live) // as Share
		for i := range shares {
			caps[i] = int64(math.Floor(shares[i].Share*f*nSlots + 1e-9))
		}
	default:
		apportion(shares, int64(nSlots), id.Key, caps)
	}
	if ks.applied < 0 { // new: start from the cold cap
		ks.applied = min(float64(cold()), float64(caps[self]))
	}
	// A raise waits an interval more than a rate share's: the nodes that
	// the same reports cut apply the cut at their next tick after the
	// reports reach them, up to the latency and an interval later; a
	// place taken before they do would be one too many (rates have a
	// slack for it, places none).
	mine := t.settleAfter(ks, float64(caps[self]), now, t.cfg.RaiseDelay+t.cfg.Interval)
	// What the others hold or may admit: a node's requests in flight
	// above its cap stay until they end.
	room := nSlots
	if never := n - len(t.order); never > 0 {
		// Nodes of the cluster never heard from (still joining) admit
		// at their cold cap.
		room -= float64(never) * float64(cold())
	}
	for i, u := range uses {
		if i == self {
			continue
		}
		held := u.used
		if u.alive && !u.reported {
			held = max(held, float64(cold())) // it may not follow the key yet: it admits at its cold cap
		}
		room -= max(held, float64(caps[i]))
	}
	return int64(max(0, min(mine, room))), true
}

// apportion sets caps to whole parts of n in the proportions of shares
// (which sum to at most 1): floor(n × share) each, and what the floors
// leave of floor(n × Σshares) one more each to the largest remainders,
// ties in the order of shares rotated by rot. Every node computes the
// same caps from the same shares.
func apportion(shares []NodeShare, n int64, rot uint64, caps []int64) {
	k := len(shares)
	sum, given := 0.0, int64(0)
	for i, s := range shares {
		x := s.Share * float64(n)
		caps[i] = int64(math.Floor(x + 1e-9))
		given += caps[i]
		sum += s.Share
	}
	left := min(int64(math.Floor(sum*float64(n)+1e-9)), n) - given
	start := int(rot % uint64(k))
	for ; left > 0; left-- {
		best, bestRem := -1, -1.0
		for j := range k {
			i := (start + j) % k
			rem := shares[i].Share*float64(n) - float64(caps[i])
			if rem > bestRem+1e-12 {
				best, bestRem = i, rem
			}
		}
		if bestRem <= 1e-9 {
			return
		}
		caps[best]++
	}
}

// raiseDelay is the table's raise delay.
func (s *Sharing) raiseDelay() time.Duration { return s.table.cfg.RaiseDelay }
