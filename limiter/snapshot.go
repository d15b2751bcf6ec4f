package limiter

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// A Limiter's snapshot is what a restarted process needs to go on
// counting where this one stopped: the hash seed (so that a key hashes to
// the record it left), the configuration the records were kept under (so
// that a changed config carries them as a reload does, carry.go), and
// the records themselves, by hash: keys are not stored, only hashed.
// Every state word is an absolute time or a count, so the time a process
// was down needs no adjusting: windows have slid and buckets refilled by
// then, and a block still ends when it ended. A clock that went backwards
// finds state from its future, which the algorithms never read as quota
// given back.
//
// A full snapshot holds every key that is not idle; a delta, the keys
// whose state changed since the snapshot before (the dirtyBit a decision
// sets, store.go) and the keys Delete removed since (tombstones). Body:
//
//	seed      5 × 8 bytes
//	config    appendConfig's
//	records   count, then each: word 0 (the hash, spentBit kept) in 8
//	          bytes, the other state words xor the record before's, as
//	          varints; a sliding log's events: count, then each event's
//	          time (a varint of the difference from the one before) and
//	          units
//	deleted   count, then each hash in 8 bytes (a delta's; a full
//	          snapshot's is 0)
//
// A snapshot is taken one shard at a time, under its lock: a decision on
// another shard goes on, one on the shard being written waits for the
// shard's records to be encoded (about 4,000 at most, bounded by the
// shard count of shardCount).

// maxTombstones bounds the keys Delete remembers for the next delta;
// past it the next snapshot is a full one.
const maxTombstones = 1 << 16

// tombstones are the hashes of keys deleted since the last snapshot.
type tombstones struct {
	mu       sync.Mutex
	hashes   []uint64
	overflow bool // more than maxTombstones: the next snapshot must be full
}

// add remembers hash h as deleted.
func (ts *tombstones) add(h uint64) {
	ts.mu.Lock()
	if len(ts.hashes) < maxTombstones {
		ts.hashes = append(ts.hashes, h)
	} else {
		ts.overflow = true
	}
	ts.mu.Unlock()
}

// take returns the hashes remembered and forgets them.
func (ts *tombstones) take() (hashes []uint64, overflow bool) {
	ts.mu.Lock()
	hashes, overflow = ts.hashes, ts.overflow
	ts.hashes, ts.overflow = nil, false
	ts.mu.Unlock()
	return hashes, overflow
}

// SnapshotStats says what AppendSnapshot wrote.
type SnapshotStats struct {
	// Full is true for a full snapshot, false for a delta.
	Full bool
	// Keys is the number of records written; Deleted the tombstones.
	Keys, Deleted int
}

// Empty is true for a delta that holds nothing: there is no need to
// write it.
func (s SnapshotStats) Empty() bool { return !s.Full && s.Keys == 0 && s.Deleted == 0 }

// AppendSnapshot appends to buf a snapshot of l at now, and clears the
// change marks of the keys it wrote. A full snapshot (full true) holds
// every key not idle at now; a delta, the keys changed or deleted since
// the last snapshot of either kind. A delta is only meaningful after the
// snapshots before it: if one of those was lost, take a full one. A delta
// is made full if Delete forgot more keys than it remembers
// (maxTombstones). Requests go on meanwhile: it locks one shard at a time.
func (l *Limiter) AppendSnapshot(buf []byte, now time.Time, full bool) ([]byte, SnapshotStats) {
	t := now.UnixNano()
	dead, overflow := l.deleted.take()
	full = full || overflow
	if full {
		dead = nil
	}
	p := l.plan.Load()
	start := len(buf)
	kind := byte(snapDelta)
	if full {
		kind = snapFull
	}
	buf = appendSnapHeader(buf, kind, t)
	for _, w := range l.seed {
		buf = binary.LittleEndian.AppendUint64(buf, w)
	}
	buf = appendConfig(buf, p.cfg)
	// the count goes before the records: reserve 5 bytes (a shard count
	// of keys stays below 2^35) and fill them in after
	countAt := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0)
	st := SnapshotStats{Full: full}
	var enc recordEncoder
	enc.prev = make([]uint64, p.stride)
	for i := range l.shards {
		buf = l.shards[i].appendRecords(buf, &enc, p, t, full, &st.Keys)
	}
	putUvarint5(buf[countAt:], uint64(st.Keys))
	buf = binary.AppendUvarint(buf, uint64(len(dead)))
	for _, h := range dead {
		buf = binary.LittleEndian.AppendUint64(buf, h)
	}
	st.Deleted = len(dead)
	return appendSnapTrailer(buf, start), st
}

// putUvarint5 writes v as a varint of exactly 5 bytes (v < 2^35).
func putUvarint5(b []byte, v uint64) {
	for i := range 4 {
		b[i] = byte(v) | 0x80
		v >>= 7
	}
	b[4] = byte(v)
}

// recordEncoder encodes records, each word against the record before.
type recordEncoder struct {
	prev []uint64
}

// appendRecords appends the records of s to write (all that are not
// idle, if full; else the changed ones), clears their change marks and
// adds their number to *n.
func (s *shard) appendRecords(buf []byte, enc *recordEncoder, p *plan, now int64, full bool, n *int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.table
	var hb [3]uint64
	for i := range t.slots() {
		w0 := t.recs[i*t.stride]
		if w0 == 0 || (!full && w0&dirtyBit == 0) {
			continue
		}
		w := t.hold(i, &hb)
		logs := t.logsAt(i)
		if w[0] &^= dirtyBit; !full || !p.idle(w, logs, now) {
			buf = enc.append(buf, w, logs)
			*n++
		}
		t.put(i, w)
	}
	return buf
}

// append encodes one record: words w (word 0 the hash and flags) and logs.
func (e *recordEncoder) append(buf []byte, w []uint64, logs []eventLog) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, w[0]&^(refBit|dirtyBit))
	for j := 1; j < len(w); j++ {
		buf = binary.AppendUvarint(buf, w[j]^e.prev[j])
		e.prev[j] = w[j]
	}
	for k := range logs {
		l := &logs[k]
		buf = binary.AppendUvarint(buf, uint64(l.n))
		var at int64
		for i := int32(0); i < l.n; i++ {
			ev := l.at(i)
			buf = binary.AppendVarint(buf, ev.at-at)
			buf = binary.AppendUvarint(buf, uint64(ev.units))
			at = ev.at
		}
	}
	return buf
}

// A Restore rebuilds a rule's keys from its snapshots: a full one, then
// the deltas written after it, in order (Add), then into the rule's new
// Limiter (Into). The records are first kept under the configuration they
// were written with, in a Limiter of their own, so that Into can carry
// them into another configuration as a reload does.
type Restore struct {
	now     int64
	kept    *Limiter // the records, under cfg
	cfg     Config   // the last snapshot's configuration
	written int64    // the last snapshot's time
}

// NewRestore starts a restore at now: the time against which keys are
// found idle (Into drops them).
func NewRestore(now time.Time) *Restore { return &Restore{now: now.UnixNano()} }

// Add applies one snapshot: the first must be full, each later one a
// delta of the same seed and layout. A snapshot that fails to decode
// changes nothing that Into will use if it was the first; a later one may
// have been applied in part (the records before the fault): stop there.
func (r *Restore) Add(data []byte) error {
	rd, kind, written, err := openSnapshot(data)
	if err != nil {
		return err
	}
	switch {
	case kind != snapFull && kind != snapDelta:
		return fmt.Errorf("%w: kind %d, not a rule's counters", ErrSnapshot, kind)
	case r.kept == nil && kind != snapFull:
		return fmt.Errorf("%w: a delta without a full snapshot before it", ErrSnapshot)
	case r.kept != nil && kind == snapFull:
		return fmt.Errorf("%w: a second full snapshot", ErrSnapshot)
	}
	var seed hashSeed
	for i := range seed {
		seed[i] = rd.u64()
	}
	cfg := rd.config()
	if rd.err != nil {
		return rd.err
	}
	if r.kept == nil {
		kept, err := New(cfg)
		if err != nil {
			return fmt.Errorf("%w: config: %v", ErrSnapshot, err)
		}
		kept.seed = seed
		r.kept = kept
	} else {
		p, _ := newPlan(cfg)
		if seed != r.kept.seed || !p.sameLayout(r.kept.plan.Load()) {
			return fmt.Errorf("%w: a delta of another limiter (seed or layout)", ErrSnapshot)
		}
	}
	r.cfg, r.written = cfg, written
	if err := r.kept.putRecords(&rd); err != nil {
		return err
	}
	if rd.end() != nil {
		return rd.err
	}
	return nil
}

// putRecords reads records and tombstones into l.
func (l *Limiter) putRecords(rd *snapReader) error {
	p := l.plan.Load()
	minBytes := 8 + (p.stride - 1) + p.logs
	n := rd.count(minBytes, 1<<35, "records")
	for i := range l.shards { // one allocation a shard, not a resize every quarter
		sh := &l.shards[i]
		sh.mu.Lock()
		sh.table.reserve(min(sh.capacity, n/len(l.shards)*9/8+minSlots))
		sh.mu.Unlock()
	}
	prev := make([]uint64, p.stride)
	w := make([]uint64, p.stride)
	logs := make([]eventLog, p.logs)
	for range n {
		w[0] = rd.u64()
		for j := 1; j < p.stride; j++ {
			w[j] = rd.uvarint() ^ prev[j]
			prev[j] = w[j]
		}
		for k := range logs {
			logs[k] = rd.eventLog()
		}
		if rd.err != nil {
			return rd.err
		}
		if w[0]&^flagBits == 0 {
			return fmt.Errorf("%w: a record of hash 0", ErrSnapshot)
		}
		l.putRecord(p, w, logs)
	}
	dead := rd.count(8, maxTombstones, "deleted keys")
	for range dead {
		if h := rd.u64() &^ flagBits; h != 0 {
			s := l.shard(h)
			s.mu.Lock()
			if slot, ok := s.table.find(h); ok {
				s.table.remove(slot)
			}
			s.mu.Unlock()
		}
	}
	return rd.err
}

// eventLog reads a sliding log's events: times in order, units at most
// MaxCount each.
func (r *snapReader) eventLog() eventLog {
	var l eventLog
	n := r.count(2, MaxLogCount, "events")
	var at int64
	for i := range n {
		d := r.varint()
		u := r.bounded(MaxCount, "units")
		if r.err != nil {
			return eventLog{}
		}
		if i > 0 && d <= 0 {
			r.fail("events out of order")
			return eventLog{}
		}
		at += d
		l.push(at, int64(u))
	}
	return l
}

// putRecord sets the state of the key of record w (word 0 its hash and
// spentBit) to w's words and logs, entering it if new.
func (l *Limiter) putRecord(p *plan, w []uint64, logs []eventLog) {
	h := w[0] &^ flagBits
	s := l.shard(h)
	s.mu.Lock()
	slot, ok := s.table.find(h)
	if !ok {
		slot = s.insert(h, p, 0)
	}
	var buf [3]uint64
	r := s.table.hold(slot, &buf)
	copy(r[1:], w[1:])
	s.table.put(slot, r)
	for k, lg := range logs {
		s.table.logsAt(slot)[k] = lg.clone()
	}
	s.table.setSpent(slot, w[0]&spentBit != 0)
	s.mu.Unlock()
}

// Written is when the last snapshot added was taken (the writer's clock).
func (r *Restore) Written() time.Time { return time.Unix(0, r.written) }

// Into puts the keys restored into l, which must hold none yet (a rule's
// new Limiter, before its first request), and returns how many. l takes
// the snapshots' seed. Under the same layout every key keeps its state as
// written, the limits now l's (a changed count or window keeps the units
// used, as a reload's Reconfigure does); under another, the limits of
// the same window and algorithm carry over, as a reload's Adopt does. A
// cluster's share is not restored: the fleet's reports give it anew.
// Keys idle at the restore's time are dropped; l's MaxKeys bounds the
// rest (its eviction makes room).
func (r *Restore) Into(l *Limiter) (int, error) {
	if r.kept == nil {
		return 0, fmt.Errorf("%w: no full snapshot", ErrSnapshot)
	}
	if n := l.Len(); n > 0 {
		return 0, fmt.Errorf("restore into a limiter holding %d keys", n)
	}
	if _, err := r.kept.Reconfigure(r.cfg); err != nil {
		return 0, err
	}
	op, np := r.kept.plan.Load(), l.plan.Load()
	var runs []wordRun
	var logs [][2]int
	if op.sameLayout(np) {
		for j := 1; j < np.stride; j++ {
			if j != np.shareW {
				runs = append(runs, wordRun{j, j, 1})
			}
		}
		for k := range np.logs {
			logs = append(logs, [2]int{k, k})
		}
	} else {
		runs, logs = carried(op, np)
		runs = slicesDeleteShare(runs, np.shareW)
	}
	l.seed = r.kept.seed
	return l.adopt(r.kept, runs, logs, r.now, true), nil
}

// slicesDeleteShare drops the run that copies the share word (at shareW
// of the new layout), if any.
func slicesDeleteShare(runs []wordRun, shareW int) []wordRun {
	out := runs[:0]
	for _, r := range runs {
		if shareW == 0 || r.to != shareW {
			out = append(out, r)
		}
	}
	return out
}

// reserve grows t, if need be, to hold n records without a resize.
func (t *table) reserve(n int) {
	size := t.slots()
	for maxLoadDen*n > maxLoadNum*size {
		size = grow(size)
	}
	if size > t.slots() {
		t.resize(size)
	}
}
