package limiter

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// A rule's blocks are snapshotted whole (they are few: keys blocked or
// with offences remembered), as a snapshot of kind snapBlocks (see
// snapcodec.go) whose body is
//
//	count, then each entry: the key (a length and its bytes), the end of
//	its last block (Unix ns, 8 bytes), its offences (a varint)
//
// A block keeps its end and its offence count across a restart: a block
// still running runs to its end, and the key's next block escalates as
// it would have.

// maxSnapBlockKey bounds a blocked key read from a snapshot.
const maxSnapBlockKey = 1 << 16

// Changes counts the changes of b's entries since NewBlocks (a block
// started, merged, lifted, or forgotten by SweepAt): a writer of
// snapshots skips b while it has not moved.
func (b *Blocks) Changes() uint64 { return b.changes.Load() }

// AppendSnapshot appends a snapshot of b's entries at now to buf: every
// key blocked, or whose offences are still remembered.
func (b *Blocks) AppendSnapshot(buf []byte, now time.Time) []byte {
	t := now.UnixNano()
	start := len(buf)
	buf = appendSnapHeader(buf, snapBlocks, t)
	var entries []blockEntry
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for _, e := range s.heap {
			if t-e.until <= b.reset {
				entries = append(entries, blockEntry{key: e.key, until: e.until, offences: e.offences})
			}
		}
		s.mu.Unlock()
	}
	buf = binary.AppendUvarint(buf, uint64(len(entries)))
	for _, e := range entries {
		buf = binary.AppendUvarint(buf, uint64(len(e.key)))
		buf = append(buf, e.key...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(e.until))
		buf = binary.AppendUvarint(buf, uint64(e.offences))
	}
	return appendSnapTrailer(buf, start)
}

// RestoreSnapshot merges the entries of a snapshot AppendSnapshot wrote
// into b, as MergeAt does (an entry whose block ended more than the reset
// duration before now is dropped; b's bound holds), and returns how many
// it took. A snapshot that fails to decode changes nothing.
func (b *Blocks) RestoreSnapshot(data []byte, now time.Time) (int, error) {
	rd, kind, _, err := openSnapshot(data)
	if err != nil {
		return 0, err
	}
	if kind != snapBlocks {
		return 0, fmt.Errorf("%w: kind %d, not blocks", ErrSnapshot, kind)
	}
	n := rd.count(1+8+1, math.MaxInt32, "blocks")
	entries := make([]BlockedKey, 0, n)
	for range n {
		key := rd.bytes(maxSnapBlockKey)
		until := int64(rd.u64())
		offences := rd.bounded(math.MaxInt32, "offences")
		entries = append(entries, BlockedKey{Key: key, Until: time.Unix(0, until), Offences: int(offences)})
	}
	if err := rd.end(); err != nil {
		return 0, err
	}
	took := 0
	for _, e := range entries {
		if b.MergeAt(e.Key, e.Until, e.Offences, now) {
			took++
		}
	}
	return took, nil
}
