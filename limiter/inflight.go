package limiter

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// InFlight counts the requests of each key in flight at once, for one
// rule's max_concurrent: AcquireScaled admits a request while its key has
// fewer than n in flight and returns a Slot; the Slot's Release gives the
// place back when the request ends.
//
// A key has an entry only while it has requests in flight: the last
// Release frees it, so memory follows the requests in flight (about 100
// bytes a key), not the keys seen. MaxKeys bounds the entries on top of
// that, for the whole InFlight, exactly: while MaxKeys keys have requests
// in flight, a request of a key with no entry is refused (AcquireScaled
// reports ok false and an in-flight count of 0, and Full counts it),
// whatever shard its key falls in, as nginx's limit_conn refuses when its
// zone is full; keys with requests in flight go on as before. Below
// MaxKeys no new key is refused. A table that fills means MaxKeys distinct
// keys each holding a request open at once.
//
// An InFlight holds no limit (n is an argument of each call), so a reload
// that keeps the rule keeps its InFlight as it is (SetMaxKeys changes the
// bound): there is no successor to adopt it. A copy of the counts into
// another InFlight would be wrong anyway, since the requests in flight
// release into the InFlight that admitted them (their Slot holds it).
//
// Acquire and release lock the key's shard (a mutex, one map lookup) and
// allocate nothing for a key with an entry; a key's first request reuses
// a freed entry when its shard has one. A key's first request and its
// last release also count it in or out of the bound, one atomic add on a
// counter all shards share. Its methods are safe for concurrent use.
type InFlight struct {
	seed    maphash.Seed
	keys    atomic.Int64 // keys with an entry, all shards; at most maxKeys but after SetMaxKeys lowers it
	maxKeys atomic.Int64
	_       [48]byte // the shards' locks off the counters' cache line
	shards  [inFlightShards]inFlightShard
}

// inFlightShards is the number of shards: a power of two.
const inFlightShards = 64

// DefaultInFlightMaxKeys is the bound on keys with requests in flight
// when NewInFlight is given none.
const DefaultInFlightMaxKeys = 100_000

// inFlightShard is one shard of an InFlight, on its own cache lines.
type inFlightShard struct {
	mu    sync.Mutex
	keys  map[uint64]*inFlightEntry
	free  []*inFlightEntry // freed entries, for new keys
	gen   uint64           // entries created
	full  uint64           // requests refused: the table full
	total atomic.Int64     // requests in flight; written under mu
	_     [64]byte
}

// inFlightEntry is a key with requests in flight.
type inFlightEntry struct {
	key  string
	n    int64  // requests in flight
	peak int64  // the most in flight since the last TakePeak
	gen  uint64 // which entry of the shard: a Slot of a forgotten entry releases nothing
}

// maxFreeEntries bounds the freed entries a shard keeps for reuse.
const maxFreeEntries = 64

// NewInFlight returns an empty InFlight holding at most maxKeys keys with
// requests in flight (0 or less: DefaultInFlightMaxKeys).
func NewInFlight(maxKeys int) *InFlight {
	f := &InFlight{seed: maphash.MakeSeed()}
	for i := range f.shards {
		f.shards[i].keys = make(map[uint64]*inFlightEntry)
	}
	f.SetMaxKeys(maxKeys)
	return f
}

// SetMaxKeys changes the bound on keys with requests in flight (0 or
// less: DefaultInFlightMaxKeys). Keys already in flight stay, over the
// bound if it fell: only new keys are refused until enough are freed.
func (f *InFlight) SetMaxKeys(maxKeys int) {
	if maxKeys <= 0 {
		maxKeys = DefaultInFlightMaxKeys
	}
	f.maxKeys.Store(int64(maxKeys))
}

// countKey counts a new key in the bound, if it leaves room for one.
func (f *InFlight) countKey() bool {
	for {
		n := f.keys.Load()
		if n >= f.maxKeys.Load() {
			return false
		}
		if f.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Slot is one admitted request's place in its key's count. Release it
// exactly once the request ends: Release empties the Slot, so a second
// call on the same variable does nothing. A copy of a Slot is a second
// handle on the same place: keep one (a field of the request's state),
// never release copies. The zero Slot (a refused request) holds nothing.
type Slot struct {
	f   *InFlight
	h   uint64
	gen uint64
}

// Held reports whether s holds a place (it came from an admission and has
// not been released).
func (s *Slot) Held() bool { return s.f != nil }

// Release gives the place back: the key has one request fewer in flight,
// and its entry is freed at zero. It does nothing on an empty Slot, or if
// the key was forgotten (Forget) since the admission.
func (s *Slot) Release() {
	f, h, gen := s.f, s.h, s.gen
	if f == nil {
		return
	}
	*s = Slot{}
	sh := f.shard(h)
	sh.mu.Lock()
	if e := sh.keys[h]; e != nil && e.gen == gen {
		e.n--
		sh.total.Add(-1)
		if e.n <= 0 {
			f.remove(sh, h, e)
		}
	}
	sh.mu.Unlock()
}

func (f *InFlight) shard(h uint64) *inFlightShard {
	return &f.shards[h&(inFlightShards-1)]
}

// AcquireScaled admits a request of key if key has fewer than n requests
// in flight, n being the rule's max_concurrent after every scale (tier,
// country, this node's part of a cluster's N). Admitted, it returns the
// request's Slot, true, and the key's count with this request; refused,
// an empty Slot, false, and the key's count (0 when the key has none: n
// is 0 or less, or the table is full, see Full). A refusal changes
// nothing but the key's peak.
func (f *InFlight) AcquireScaled(key string, n int64) (slot Slot, ok bool, inFlight int64) {
	h := maphash.String(f.seed, key)
	s := f.shard(h)
	s.mu.Lock()
	e := s.keys[h]
	switch {
	case e != nil && e.n >= n:
		inFlight = e.n
		s.mu.Unlock()
		return Slot{}, false, inFlight
	case e == nil && n <= 0:
		s.mu.Unlock()
		return Slot{}, false, 0
	case e == nil && !f.countKey():
		s.full++
		s.mu.Unlock()
		return Slot{}, false, 0
	case e == nil:
		e = s.add(h, key)
	}
	e.n++
	e.peak = max(e.peak, e.n)
	inFlight = e.n
	s.total.Add(1)
	slot = Slot{f: f, h: h, gen: e.gen}
	s.mu.Unlock()
	return slot, true, inFlight
}

// add creates key's entry, under mu.
func (s *inFlightShard) add(h uint64, key string) *inFlightEntry {
	var e *inFlightEntry
	if k := len(s.free); k > 0 {
		e, s.free = s.free[k-1], s.free[:k-1]
	} else {
		e = new(inFlightEntry)
	}
	s.gen++
	*e = inFlightEntry{key: key, gen: s.gen}
	s.keys[h] = e
	return e
}

// remove frees key's entry, under s.mu, and its place in the bound.
func (f *InFlight) remove(s *inFlightShard, h uint64, e *inFlightEntry) {
	delete(s.keys, h)
	f.keys.Add(-1)
	*e = inFlightEntry{}
	if len(s.free) < maxFreeEntries {
		s.free = append(s.free, e)
	}
}

// InFlightOf is the number of key's requests in flight.
func (f *InFlight) InFlightOf(key string) int64 {
	n := int64(0)
	f.atKey(key, func(_ *inFlightShard, _ uint64, e *inFlightEntry) { n = e.n })
	return n
}

// atKey runs fn on key's entry, under its shard's lock, if key has one,
// and reports whether it has.
func (f *InFlight) atKey(key string, fn func(s *inFlightShard, h uint64, e *inFlightEntry)) bool {
	h := maphash.String(f.seed, key)
	s := f.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[h]
	if e != nil {
		fn(s, h, e)
	}
	return e != nil
}

// TakePeak returns the most requests of key in flight at once since the
// last call (or since the key's entry was created: an entry freed at zero
// forgets its peak), and its count now, and starts the peak anew from
// the count. It is the demand a cluster reports for key.
func (f *InFlight) TakePeak(key string) (peak, inFlight int64) {
	f.atKey(key, func(_ *inFlightShard, _ uint64, e *inFlightEntry) {
		peak, e.peak, inFlight = e.peak, e.n, e.n
	})
	return peak, inFlight
}

// Forget drops key's entry (an admin reset): its next request counts from
// zero, and the Slots of its requests in flight release nothing. It
// reports whether the key had requests in flight.
func (f *InFlight) Forget(key string) bool {
	return f.atKey(key, func(s *inFlightShard, h uint64, e *inFlightEntry) {
		s.total.Add(-e.n)
		f.remove(s, h, e)
	})
}

// Total is the number of requests in flight, all keys together (the gauge
// in_flight{rule}). It locks nothing: each shard's count is exact, their
// sum is read one shard after the other.
func (f *InFlight) Total() int64 {
	n := int64(0)
	for i := range f.shards {
		n += f.shards[i].total.Load()
	}
	return n
}

// Len is the number of keys with requests in flight.
func (f *InFlight) Len() int {
	return sumShards(f.shards[:], (*inFlightShard).len)
}

// len is the number of keys s holds.
func (s *inFlightShard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// Full is the number of requests refused because the table of keys was
// full (MaxKeys keys in flight) since NewInFlight.
func (f *InFlight) Full() uint64 {
	n := uint64(0)
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		n += s.full
		s.mu.Unlock()
	}
	return n
}

// KeyInFlight is a key and its requests in flight.
type KeyInFlight struct {
	Key      string
	InFlight int64
}

// Busiest returns at most limit keys with the most requests in flight,
// the most first (ties by key), for the admin API and the dashboard. It
// locks one shard at a time. A limit of 0 or less returns nothing.
func (f *InFlight) Busiest(limit int) []KeyInFlight {
	if limit <= 0 {
		return nil
	}
	order := func(a, b KeyInFlight) int {
		if c := cmp.Compare(b.InFlight, a.InFlight); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	}
	out := make([]KeyInFlight, 0, limit+1)
	for i := range f.shards {
		s := &f.shards[i]
		s.mu.Lock()
		for _, e := range s.keys {
			k := KeyInFlight{e.key, e.n}
			if len(out) == limit && order(k, out[limit-1]) >= 0 {
				continue
			}
			j, _ := slices.BinarySearchFunc(out, k, order)
			out = slices.Insert(out, j, k)
			if len(out) > limit {
				out = out[:limit]
			}
		}
		s.mu.Unlock()
	}
	return out
}
