package limiter

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Overrides are written as a snapshot of kind snapOverrides (see
// snapcodec.go): the whole set for Caddy's storage, or the changes a
// cluster's message carries. Its body is
//
//	count, then each entry: the key (a length and its bytes), the factor
//	(float64 bits, 8 bytes), the expiry and the time set (Unix ns, 8
//	bytes each; expiry 0: none), who set it (a length and its bytes),
//	and 1 byte, 1 for a removal
//
// Every entry keeps its version (the time set), so that reading a
// snapshot back merges it as any other change (Overrides.Merge).

// Bounds of an override read back.
const (
	maxSnapOverrideKey = 1 << 16
	maxSnapOverrideBy  = 1 << 10
)

// AppendOverrides appends a snapshot of es, written at now, to buf.
func AppendOverrides(buf []byte, es []Override, now time.Time) []byte {
	start := len(buf)
	buf = appendSnapHeader(buf, snapOverrides, now.UnixNano())
	buf = binary.AppendUvarint(buf, uint64(len(es)))
	for _, e := range es {
		buf = binary.AppendUvarint(buf, uint64(len(e.Key)))
		buf = append(buf, e.Key...)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.Factor))
		var exp int64
		if !e.Expires.IsZero() {
			exp = e.Expires.UnixNano()
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(exp))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(e.SetAt.UnixNano()))
		by := e.SetBy[:min(len(e.SetBy), maxSnapOverrideBy)]
		buf = binary.AppendUvarint(buf, uint64(len(by)))
		buf = append(buf, by...)
		removed := byte(0)
		if e.Removed {
			removed = 1
		}
		buf = append(buf, removed)
	}
	return appendSnapTrailer(buf, start)
}

// ReadOverrides reads the entries of a snapshot AppendOverrides wrote.
// An entry with a factor that is negative, NaN or infinite fails the
// whole snapshot.
func ReadOverrides(data []byte) ([]Override, error) {
	rd, kind, _, err := openSnapshot(data)
	if err != nil {
		return nil, err
	}
	if kind != snapOverrides {
		return nil, fmt.Errorf("%w: kind %d, not overrides", ErrSnapshot, kind)
	}
	n := rd.count(1+8+8+8+1+1, math.MaxInt32, "overrides")
	out := make([]Override, 0, n)
	for range n {
		e := Override{Key: rd.bytes(maxSnapOverrideKey)}
		e.Factor = math.Float64frombits(rd.u64())
		if exp := int64(rd.u64()); exp != 0 {
			e.Expires = time.Unix(0, exp)
		}
		e.SetAt = time.Unix(0, int64(rd.u64()))
		e.SetBy = rd.bytes(maxSnapOverrideBy)
		switch rd.bounded(1, "removed") {
		case 1:
			e.Removed = true
		}
		if !(e.Factor >= 0) || math.IsInf(e.Factor, 1) {
			rd.fail("override %q: factor %v", e.Key, e.Factor)
		}
		out = append(out, e)
	}
	if err := rd.end(); err != nil {
		return nil, err
	}
	return out, nil
}

// AppendSnapshot appends a snapshot of o's entries, removals too, at now
// to buf.
func (o *Overrides) AppendSnapshot(buf []byte, now time.Time) []byte {
	return AppendOverrides(buf, o.All(), now)
}

// RestoreSnapshot merges the entries of a snapshot AppendSnapshot wrote
// into o (Merge: a later change held wins), and returns how many it took.
// A snapshot that fails to decode changes nothing.
func (o *Overrides) RestoreSnapshot(data []byte) (int, error) {
	es, err := ReadOverrides(data)
	if err != nil {
		return 0, err
	}
	return len(o.Merge(es)), nil
}
