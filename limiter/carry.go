package limiter

import (
	"slices"
	"time"
)

// Successor returns a new, empty Limiter for cfg that hashes keys as l
// does, so that Adopt can carry l's keys into it. Use it where cfg lays
// keys out differently from l (Keeps is false): a limit or a burst bucket
// added or removed, another algorithm.
func (l *Limiter) Successor(cfg Config) (*Limiter, error) {
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	n.seed = l.seed
	return n, nil
}

// Adopt copies into l the state of every key of old that l does not hold
// yet. Limits are matched by window: a limit of l takes the state of the
// limit of old with the same window, if both use the same algorithm. The
// burst bucket and the share carry over when both have them. Whatever has
// no counterpart starts afresh, as for a new key. l must come from
// old.Successor (Adopt does nothing otherwise). It locks one shard of old
// at a time, and one of l per key; requests go on meanwhile.
func (l *Limiter) Adopt(old *Limiter) {
	if l == old || l.seed != old.seed {
		return
	}
	runs, logs := carried(old.plan.Load(), l.plan.Load())
	if len(runs) == 0 && len(logs) == 0 {
		return
	}
	l.adopt(old, runs, logs, time.Now().UnixNano(), false)
}

// adopt is Adopt of the runs of words and the logs given, at now; with
// dropIdle, the keys of old that are idle at now stay behind (a restore).
// It returns the number of keys copied.
func (l *Limiter) adopt(old *Limiter, runs []wordRun, logs [][2]int, now int64, dropIdle bool) int {
	np, op := l.plan.Load(), old.plan.Load()
	copied := 0
	if dropIdle && len(l.shards) == len(old.shards) { // a restore: shard i's keys go to shard i
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			sh.table.reserve(min(sh.capacity, old.shards[i].table.live))
			sh.mu.Unlock()
		}
	}
	for i := range old.shards {
		from := &old.shards[i]
		from.mu.Lock()
		ot := &from.table // records stay put: only l's tables change
		var obuf, nbuf [3]uint64
		for slot := range ot.slots() {
			if ot.recs[slot*ot.stride] == 0 {
				continue
			}
			ow := ot.snapshot(slot, &obuf)
			if dropIdle && op.idle(ow, ot.logsAt(slot), now) {
				continue
			}
			h := ow[0] &^ flagBits
			to := l.shard(h)
			to.mu.Lock()
			if _, ok := to.table.find(h); !ok {
				ns := to.insert(h, np, now)
				nw := to.table.hold(ns, &nbuf)
				nw[0] |= ow[0]&refBit | dirtyBit
				for _, r := range runs {
					copy(nw[r.to:r.to+r.n], ow[r.from:r.from+r.n])
				}
				to.table.put(ns, nw)
				to.table.setSpent(ns, ow[0]&spentBit != 0)
				ol, nl := ot.logsAt(slot), to.table.logsAt(ns)
				for _, pair := range logs {
					nl[pair[1]] = ol[pair[0]].clone()
				}
				copied++
			}
			to.mu.Unlock()
		}
		from.mu.Unlock()
	}
	return copied
}

// wordRun is n state words copied from word `from` of an old key to word
// `to` of the new one.
type wordRun struct{ from, to, n int }

// carried is what of a key kept under op carries over to np: runs of
// state words, and pairs of event logs (old index, new index).
func carried(op, np *plan) (runs []wordRun, logs [][2]int) {
	if op.algo == np.algo {
		used := make([]bool, len(op.limits))
		for _, nl := range np.limits {
			for j, ol := range op.limits {
				if used[j] || ol.w != nl.w || !sameCalendar(ol.cal, nl.cal) {
					continue
				}
				used[j] = true
				if np.algo == SlidingLog {
					logs = append(logs, [2]int{ol.word, nl.word})
				} else {
					runs = append(runs, wordRun{ol.word, nl.word, 2})
				}
				break
			}
		}
	}
	if op.burstW != 0 && np.burstW != 0 {
		runs = append(runs, wordRun{op.burstW, np.burstW, 2})
	}
	if op.shareW != 0 && np.shareW != 0 {
		runs = append(runs, wordRun{op.shareW, np.shareW, 1})
	}
	return runs, logs
}

// clone is a copy of l that shares no memory with it.
func (l eventLog) clone() eventLog {
	l.buf = slices.Clone(l.buf)
	return l
}
