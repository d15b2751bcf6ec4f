package limiter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
)

// A snapshot (snapshot.go, blocksnap.go) is one binary object:
//
//	"ELSN"  magic, 4 bytes
//	version 1 byte (snapVersion)
//	kind    1 byte: snapFull, snapDelta, snapBlocks or snapOverrides
//	written 8 bytes, the writer's clock (Unix ns)
//	body    the kind's (see AppendSnapshot and Blocks.AppendSnapshot)
//	crc     4 bytes, CRC-32C of everything before it
//
// Integers in bodies are little-endian: fixed 8 bytes for hashes and
// seeds, unsigned varints for counts and lengths, and a record's state
// words as the varint of their xor with the same word of the record
// before (keys of one window share its start: a byte).
//
// Decoding never panics, allocates no more than the input's length
// allows, and refuses another magic or version, another kind than the
// one expected, a bad checksum (a truncated or damaged object), a count
// larger than the bytes left could hold, and trailing bytes.

// snapMagic opens every snapshot.
const snapMagic = "ELSN"

// snapVersion is the format written; another is refused (the rule then
// starts afresh).
const snapVersion = 1

// The kinds of snapshot.
const (
	snapFull      = 1 // every key of a limiter
	snapDelta     = 2 // the keys changed since the snapshot before
	snapBlocks    = 3 // a rule's blocked keys
	snapOverrides = 4 // a rule's per-key overrides (overridesnap.go)
)

// snapHeaderBytes and snapTrailerBytes frame a body.
const snapHeaderBytes, snapTrailerBytes = 4 + 1 + 1 + 8, 4

// ErrSnapshot is wrapped by every error decoding a snapshot.
var ErrSnapshot = errors.New("bad snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendSnapHeader starts a snapshot of kind written at now (Unix ns).
func appendSnapHeader(buf []byte, kind byte, now int64) []byte {
	buf = append(buf, snapMagic...)
	buf = append(buf, snapVersion, kind)
	return binary.LittleEndian.AppendUint64(buf, uint64(now))
}

// appendSnapTrailer ends the snapshot that starts at buf[start:].
func appendSnapTrailer(buf []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], castagnoli))
}

// snapReader reads a snapshot's fields; the first error sticks, and every
// read after it returns zero.
type snapReader struct {
	b   []byte
	err error
}

// openSnapshot checks data's frame and returns a reader of its body, its
// kind and when it was written.
func openSnapshot(data []byte) (r snapReader, kind byte, written int64, err error) {
	if len(data) < snapHeaderBytes+snapTrailerBytes {
		return r, 0, 0, fmt.Errorf("%w: %d bytes, shorter than a header", ErrSnapshot, len(data))
	}
	if string(data[:4]) != snapMagic {
		return r, 0, 0, fmt.Errorf("%w: not a snapshot (magic %q)", ErrSnapshot, data[:4])
	}
	if data[4] != snapVersion {
		return r, 0, 0, fmt.Errorf("%w: format version %d, this build reads %d", ErrSnapshot, data[4], snapVersion)
	}
	body := data[:len(data)-snapTrailerBytes]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(body):]) {
		return r, 0, 0, fmt.Errorf("%w: checksum mismatch (truncated or damaged)", ErrSnapshot)
	}
	kind, written = data[5], int64(binary.LittleEndian.Uint64(data[6:]))
	return snapReader{b: body[snapHeaderBytes:]}, kind, written, nil
}

func (r *snapReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrSnapshot}, args...)...)
	}
	r.b = nil
}

// u64 reads 8 bytes.
func (r *snapReader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// uvarint reads an unsigned varint.
func (r *snapReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

// varint reads a signed varint.
func (r *snapReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads a varint of r with decode (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *snapReader, decode func([]byte) (T, int)) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items of at least minBytes each, refusing one
// that the bytes left could not hold, or above max.
func (r *snapReader) count(minBytes int, max uint64, what string) int {
	n := r.uvarint()
	if r.err == nil && (n > uint64(len(r.b)/minBytes) || n > max) {
		r.fail("%d %s in %d bytes", n, what, len(r.b))
		return 0
	}
	return int(n)
}

// bounded reads an unsigned varint of at most max.
func (r *snapReader) bounded(max uint64, what string) uint64 {
	v := r.uvarint()
	if v > max {
		r.fail("%s %d: above %d", what, v, max)
		return 0
	}
	return v
}

// bytes reads a length-prefixed string of at most max bytes.
func (r *snapReader) bytes(max int) string {
	n := r.count(1, uint64(max), "bytes")
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// end fails if bytes are left.
func (r *snapReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// appendConfig writes the parts of cfg that lay keys out and bound them.
func appendConfig(buf []byte, cfg Config) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(cfg.Algorithm)))
	buf = append(buf, cfg.Algorithm...)
	buf = binary.AppendUvarint(buf, uint64(len(cfg.Limits)))
	for _, l := range cfg.Limits {
		buf = binary.AppendUvarint(buf, uint64(l.Count))
		buf = binary.AppendUvarint(buf, uint64(l.Window))
	}
	buf = binary.AppendUvarint(buf, uint64(cfg.Burst))
	buf = binary.AppendUvarint(buf, uint64(cfg.MaxDelay))
	buf = binary.AppendUvarint(buf, uint64(cfg.MaxKeys))
	shares := byte(0)
	if cfg.Shares {
		shares = 1
	}
	return append(buf, shares)
}

// config reads what appendConfig wrote, and checks it.
func (r *snapReader) config() Config {
	var cfg Config
	cfg.Algorithm = Algorithm(r.bytes(32))
	n := r.count(2, MaxLimits, "limits")
	for range n {
		c := r.bounded(MaxCount, "count")
		w := r.bounded(uint64(MaxWindow), "window")
		cfg.Limits = append(cfg.Limits, Limit{Count: int64(c), Window: time.Duration(w)})
	}
	cfg.Burst = int64(r.bounded(MaxCount, "burst"))
	cfg.MaxDelay = time.Duration(r.bounded(math.MaxInt64, "max_delay"))
	cfg.MaxKeys = int(r.bounded(math.MaxInt32, "max_keys"))
	if len(r.b) < 1 {
		r.fail("truncated")
		return Config{}
	}
	cfg.Shares = r.b[0] == 1
	r.b = r.b[1:]
	if r.err == nil {
		if err := cfg.Validate(); err != nil {
			r.fail("config: %v", err)
		}
	}
	return cfg
}
