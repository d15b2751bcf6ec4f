package limiter

import (
	"slices"
	"testing"
	"time"
)

// hashAt is a valid key hash (flagBits clear, not 0) whose home is slot
// home of a table of up to 1<<8 slots; n tells apart hashes of the same home.
func hashAt(home, n int) uint64 { return uint64(home|(n+1)<<8) << 3 }

// grownSize is true for the sizes grow makes: 16, 20, 24, 28, 32, 40, …
func grownSize(n int) bool {
	for m := 0; m <= n; m = grow(m) {
		if m == n {
			return true
		}
	}
	return false
}

// checkTable checks the invariants of a table: a size of grow's, at most
// 13/16 full; every record reachable from its home, with no empty slot
// on the way, and no hash twice; every empty slot all zero, logs too.
func checkTable(tb testing.TB, t *table) {
	tb.Helper()
	n := t.slots()
	if n == 0 {
		if t.live != 0 {
			tb.Fatalf("no slots, %d live", t.live)
		}
		return
	}
	if !grownSize(n) || len(t.recs) != n*t.stride || len(t.logs) != n*t.nlogs {
		tb.Fatalf("%d slots, %d words, %d logs (stride %d, %d logs)", n, len(t.recs), len(t.logs), t.stride, t.nlogs)
	}
	if maxLoadDen*t.live > maxLoadNum*n {
		tb.Fatalf("%d live in %d slots: more than 13/16 full", t.live, n)
	}
	live, spent, seen := 0, 0, map[uint64]bool{}
	for i := range n {
		w := t.record(i)
		if w[0] == 0 {
			for _, x := range w {
				if x != 0 {
					tb.Fatalf("empty slot %d has words %v", i, w)
				}
			}
			for _, l := range t.logsAt(i) {
				if l.buf != nil || l.n != 0 || l.total != 0 || l.head != 0 {
					tb.Fatalf("empty slot %d has a log %+v", i, l)
				}
			}
			continue
		}
		live++
		if w[0]&spentBit != 0 {
			spent++
		}
		h := w[0] &^ flagBits
		if seen[h] {
			tb.Fatalf("hash %#x twice", h)
		}
		seen[h] = true
		for j := t.home(h); j != uint64(i); j = t.ring.next(j) {
			if t.recs[int(j)*t.stride] == 0 {
				tb.Fatalf("slot %d (home %d): slot %d on the way is empty", i, t.home(h), j)
			}
		}
		if got, ok := t.find(h); !ok || got != i {
			tb.Fatalf("find(%#x) = %d, %v; it is at %d", h, got, ok, i)
		}
	}
	if live != t.live || spent != t.spent {
		tb.Fatalf("%d records, %d spent; the table says %d, %d", live, spent, t.live, t.spent)
	}
}

// fill gives the key at slot i state words and logs that tell where they
// came from: each word is the hash plus its index, each log holds one
// event at the hash.
func fill(t *table, i int) {
	w := t.record(i)
	for j := 1; j < len(w); j++ {
		w[j] = w[0]&^flagBits + uint64(j)
	}
	for j := range t.logsAt(i) {
		t.logsAt(i)[j].push(int64(w[0]&^flagBits)+int64(j), 1)
	}
}

// checkFilled checks that the key of hash h kept the state fill gave it.
func checkFilled(tb testing.TB, t *table, h uint64) {
	tb.Helper()
	i, ok := t.find(h)
	if !ok {
		tb.Fatalf("lost %#x", h)
	}
	w := t.record(i)
	for j := 1; j < len(w); j++ {
		if w[j] != h+uint64(j) {
			tb.Fatalf("%#x at slot %d: word %d is %#x", h, i, j, w[j])
		}
	}
	for j, l := range t.logsAt(i) {
		if l.n != 1 || l.newest() != int64(h)+int64(j) {
			tb.Fatalf("%#x at slot %d: log %d is %+v", h, i, j, l)
		}
	}
}

// slotOf is where the table keeps hash h, or -1.
func slotOf(t *table, h uint64) int {
	if i, ok := t.find(h); ok {
		return i
	}
	return -1
}

// Records whose probe paths wrap around the end of the table shift back
// across it, logs and all, when a record before them is removed.
func TestTableWrapAround(t *testing.T) {
	tb := newTable(3, 2)
	a, b, c, d, e := hashAt(14, 0), hashAt(14, 1), hashAt(15, 0), hashAt(15, 1), hashAt(0, 0)
	for _, h := range []uint64{a, b, c, d, e} {
		fill(&tb, tb.add(h))
	}
	checkTable(t, &tb)
	if tb.slots() != minSlots {
		t.Fatalf("%d slots, want %d", tb.slots(), minSlots)
	}
	for h, want := range map[uint64]int{a: 14, b: 15, c: 0, d: 1, e: 2} {
		if got := slotOf(&tb, h); got != want {
			t.Fatalf("%#x at %d, want %d", h, got, want)
		}
	}
	tb.remove(14) // a: b, c, d and e all move back one
	checkTable(t, &tb)
	for h, want := range map[uint64]int{a: -1, b: 14, c: 15, d: 0, e: 1} {
		if got := slotOf(&tb, h); got != want {
			t.Fatalf("after removing a: %#x at %d, want %d", h, got, want)
		}
	}
	for _, h := range []uint64{b, c, d, e} {
		checkFilled(t, &tb, h)
	}
	tb.remove(15) // c: d moves back to its home, e to its own
	checkTable(t, &tb)
	for h, want := range map[uint64]int{b: 14, c: -1, d: 15, e: 0} {
		if got := slotOf(&tb, h); got != want {
			t.Fatalf("after removing c: %#x at %d, want %d", h, got, want)
		}
	}
	for _, h := range []uint64{b, d, e} {
		checkFilled(t, &tb, h)
	}
	if tb.live != 3 {
		t.Fatalf("live %d, want 3", tb.live)
	}
}

// The table doubles before it is more than 3/4 full, and every key keeps
// its state through each rehash.
func TestTableGrowth(t *testing.T) {
	tb := newTable(3, 1)
	if _, ok := tb.find(2); ok || tb.slots() != 0 {
		t.Fatal("an empty table allocated or found something")
	}
	var hashes []uint64
	rng := uint64(7)
	for i := range 5000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		h := rng&^flagBits | 8
		hashes = append(hashes, h)
		fill(&tb, tb.add(h))
		if i&(i+1) == 0 || i%997 == 0 {
			checkTable(t, &tb)
		}
	}
	checkTable(t, &tb)
	if tb.slots() != 7168 { // 5000 > 13/16 of 6144
		t.Fatalf("%d slots for 5000 keys, want 7168", tb.slots())
	}
	for _, h := range hashes {
		checkFilled(t, &tb, h)
	}
}

// Keys added and removed at random, in a table of long runs (few homes):
// the table agrees with a map and keeps its invariants at every step.
func TestTableChurn(t *testing.T) {
	tb := newTable(4, 1)
	ref := map[uint64]bool{}
	rng := uint64(3)
	for op := range 10_000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		// homes crowd at both ends of the table, whatever its size
		h := hashAt(int(rng>>33%6+254)&255, int(rng>>40%20))
		if i, ok := tb.find(h); ok != ref[h] {
			t.Fatalf("op %d: find(%#x) = %v, want %v", op, h, ok, ref[h])
		} else if ok {
			checkFilled(t, &tb, h)
			tb.remove(i)
			delete(ref, h)
		} else {
			fill(&tb, tb.add(h))
			ref[h] = true
		}
		checkTable(t, &tb)
	}
	if tb.live != len(ref) {
		t.Fatalf("live %d, want %d", tb.live, len(ref))
	}
}

// testShard is a shard of capacity keys, laid out for cfg.
func testShard(t *testing.T, cfg Config, capacity int) (*shard, *plan) {
	t.Helper()
	p, err := newPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &shard{table: newTable(p.stride, p.logs), capacity: capacity}, p
}

// busy gives a FixedWindow key one unit taken at now: it is not idle.
func busy(w []uint64, now int64) { w[1], w[2] = uint64(now), 1 }

// handPath is the slots that the hand visits in a turn of t from slot
// from, in order: each slot once.
func handPath(t *table, from int) []int {
	path := []int{from}
	for i := (from + t.hop) % t.slots(); i != from; i = (i + t.hop) % t.slots() {
		path = append(path, i)
	}
	return path
}

// filled is the slots of path that hold a record.
func filled(t *table, path []int) []int {
	var f []int
	for _, i := range path {
		if t.record(i)[0] != 0 {
			f = append(f, i)
		}
	}
	return f
}

// The hand visits every slot once a turn, not in a row: the slots after
// one slot are scattered over the table.
func TestHandHop(t *testing.T) {
	for n := 0; n <= 1<<14; n = grow(n) {
		if n == 0 {
			continue
		}
		tb := newTable(3, 0)
		tb.resize(n)
		path := handPath(&tb, 0)
		seen := make([]bool, n)
		for _, i := range path {
			seen[i] = true
		}
		if len(path) != n || slices.Contains(seen, false) {
			t.Fatalf("%d slots: a turn of %d steps visits some slots twice", n, len(path))
		}
		if n >= 64 && (tb.hop < n/2 || tb.hop > 3*n/4) {
			t.Errorf("%d slots: a step of %d", n, tb.hop)
		}
	}
}

// The CLOCK hand evicts the first unreferenced key it meets, clearing the
// marks of the referenced ones it passes; if all are referenced, it turns
// once round clearing them and evicts on the second turn; an idle key goes
// even if referenced.
func TestShardEvictHand(t *testing.T) {
	cfg := Config{Algorithm: FixedWindow, Limits: []Limit{{10, time.Minute}}}
	now := base.UnixNano()
	s, p := testShard(t, cfg, 8)
	for k := range 8 {
		busy(s.table.record(s.insert(hashAt(2*k, 0), p, now)), now)
	}
	order := filled(&s.table, handPath(&s.table, 0)) // the records as the hand meets them
	for k, i := range order {
		if k != 3 {
			s.table.record(i)[0] |= refBit
		}
	}
	victim := s.table.record(order[3])[0] &^ flagBits
	s.insert(hashAt(1, 1), p, now) // evicts the fourth key the hand meets
	checkTable(t, &s.table)
	if slotOf(&s.table, victim) != -1 || s.evictions != 1 || s.table.live != 8 {
		t.Fatalf("evicted %v, evictions %d, live %d", slotOf(&s.table, victim) == -1, s.evictions, s.table.live)
	}
	for _, i := range order[:3] {
		if s.table.record(i)[0]&refBit != 0 {
			t.Errorf("slot %d: the hand passed, the mark stays", i)
		}
	}
	for _, i := range order[4:] {
		if s.table.record(i)[0]&refBit == 0 {
			t.Errorf("slot %d: the hand did not pass, the mark is gone", i)
		}
	}
	if want := (order[3] + s.table.hop) % s.table.slots(); s.hand != want {
		t.Fatalf("hand at %d, want %d", s.hand, want)
	}

	// all referenced: a turn clears them all, the next evicts the first
	s, p = testShard(t, cfg, 8)
	for k := range 8 {
		w := s.table.record(s.insert(hashAt(15-k, 0), p, now))
		busy(w, now)
		w[0] |= refBit
	}
	s.hand = 5
	order = filled(&s.table, handPath(&s.table, 5))
	first := s.table.record(order[0])[0] &^ flagBits
	s.insert(hashAt(0, 1), p, now)
	checkTable(t, &s.table)
	if slotOf(&s.table, first) != -1 || s.evictions != 1 {
		t.Fatalf("the first key after the hand (slot %d) kept, or %d evictions", order[0], s.evictions)
	}
	for i := range s.table.slots() {
		if s.table.record(i)[0]&refBit != 0 {
			t.Errorf("slot %d still marked", i)
		}
	}

	// an idle key goes first, referenced or not
	s, p = testShard(t, cfg, 4)
	for k := range 4 {
		w := s.table.record(s.insert(hashAt(k, 0), p, now))
		w[0] |= refBit
		if k != 2 {
			busy(w, now)
		}
	}
	order = filled(&s.table, handPath(&s.table, 0))
	s.insert(hashAt(9, 0), p, now)
	if slotOf(&s.table, hashAt(2, 0)) != -1 || s.table.live != 4 {
		t.Fatal("the idle key stayed")
	}
	at := slices.Index(order, 2)
	for k, i := range order {
		if i == 2 {
			continue
		}
		if marked := s.table.record(i)[0]&refBit != 0; marked != (k > at) {
			t.Errorf("slot %d: marked %v, the hand passed it %v", i, marked, k < at)
		}
	}
}

// Sweep removes every idle key, though each removal shifts the records
// after it back, across the end of the table too: busy keys keep their
// state and their logs.
func TestShardSweepMovesRecords(t *testing.T) {
	now := base.UnixNano()
	for _, algo := range []Algorithm{FixedWindow, SlidingLog} {
		s, p := testShard(t, Config{Algorithm: algo, Limits: []Limit{{10, time.Minute}}}, 100)
		// a run from slot 13 round to slot 5: busy and idle keys mixed
		homes := []int{13, 13, 14, 14, 15, 15, 0, 1, 2}
		idle := map[uint64]bool{}
		for k, home := range homes {
			h := hashAt(home, k)
			i := s.insert(h, p, now)
			if k%3 != 1 { // runs of idle keys, one across the end
				idle[h] = true
				continue
			}
			if algo == SlidingLog {
				s.table.logsAt(i)[0].push(now, int64(k+1))
			} else {
				busy(s.table.record(i), now)
			}
		}
		checkTable(t, &s.table)
		if s.table.record(4)[0] == 0 || s.table.record(12)[0] != 0 {
			t.Fatal("the run is not where the test wants it")
		}
		if got := s.sweep(p, now); got != len(idle) {
			t.Fatalf("%s: swept %d, want %d", algo, got, len(idle))
		}
		checkTable(t, &s.table)
		for k, home := range homes {
			h := hashAt(home, k)
			i, ok := s.table.find(h)
			if ok == idle[h] {
				t.Fatalf("%s: key %d: kept %v", algo, k, ok)
			}
			if !ok {
				continue
			}
			if algo == SlidingLog {
				if l := s.table.logsAt(i)[0]; l.total != int64(k+1) || l.newest() != now {
					t.Fatalf("%s: key %d has the log %+v", algo, k, l)
				}
			} else if w := s.table.record(i); w[1] != uint64(now) || w[2] != 1 {
				t.Fatalf("%s: key %d has the words %v", algo, k, w)
			}
		}
	}
}

// Keys added and removed at random in tables whose size is not a power of
// two (20, 24, 28 slots: homes scaled, probes wrapping at the last slot).
func TestTableNotPowerOfTwo(t *testing.T) {
	for _, keep := range []int{15, 18, 20} {
		tb := newTable(3, 0)
		rng := uint64(keep)
		var held []uint64
		for op := range 20000 {
			rng = rng*6364136223846793005 + 1442695040888963407
			if len(held) < keep || rng>>63 == 0 && len(held) < keep+1 {
				h := rng&^flagBits | 8
				if _, ok := tb.find(h); ok {
					continue
				}
				fill(&tb, tb.add(h))
				held = append(held, h)
			} else {
				k := int(rng>>40) % len(held)
				i, ok := tb.find(held[k])
				if !ok {
					t.Fatalf("keep %d, op %d: key %#x lost", keep, op, held[k])
				}
				tb.remove(i)
				held[k] = held[len(held)-1]
				held = held[:len(held)-1]
			}
			checkTable(t, &tb)
		}
		if n := tb.slots(); n&(n-1) == 0 {
			t.Errorf("keep %d: %d slots, a power of two", keep, n)
		}
		for _, h := range held {
			checkFilled(t, &tb, h)
		}
	}
}
