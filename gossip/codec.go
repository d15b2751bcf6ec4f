package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Wire format, version 1. Every message starts with two bytes, the format
// version and the message type, so that other messages can be added and
// the format changed without confusing older nodes. All integers are
// big-endian and fixed-width, and strings are raw bytes after their
// length, so every message has exactly one encoding (decode then encode
// gives back the same bytes).
//
//	report: ver type nodeLen:u8 node seq:u64 intervalMillis:u32 count:u16 count×entry
//	entry:  rule:u64 key:u64 limit:u32 demand:u32 admitted:u32   (28 bytes)
//	blocks: a report (type MsgReportBlocks), then bcount:u16 bcount×block, bcount ≥ 1
//	block:  rule:u64 untilMillis:u64 offences:u32 keyLen:u16 key   (20+keyLen bytes, keyLen ≤ MaxBlockKeyBytes)
//	reset:  ver type ruleLen:u16 rule keyLen:u16 key   (ruleLen ≤ MaxRuleBytes, keyLen ≤ MaxKeyBytes)
//	override: ver type ruleLen:u16 rule changeLen:u16 change   (as a reset's)
//	leave:  ver type nodeLen:u8 node
const (
	// WireVersion is the version byte of the messages this package writes.
	WireVersion = 1

	// MaxNodeName is the longest node name a message can carry.
	MaxNodeName = 255

	// EntryBytes is the encoded size of one Entry.
	EntryBytes = 28

	// MaxRuleBytes is the longest rule name a Reset can carry.
	MaxRuleBytes = 255

	// MaxKeyBytes is the longest key a Reset can carry.
	MaxKeyBytes = 4096

	// BlockFixed is the encoded size of a Block without its key.
	BlockFixed = 8 + 8 + 4 + 2

	reportFixed = 2 + 1 + 8 + 4 + 2 // without the node name
)

// MsgType is the second byte of every message.
type MsgType byte

// Message types.
const (
	MsgReport MsgType = 1 // a Report (or one part of one, see SplitReport)
	MsgReset  MsgType = 2 // a Reset: forget a key everywhere (admin API DELETE)
	MsgLeave  MsgType = 3 // the sender is leaving the cluster on purpose
	// MsgReportBlocks is a report (or part) that carries blocks: a report
	// without blocks is a MsgReport, so that nodes that know no blocks
	// still read it; SplitReport puts blocks in parts of their own, so
	// that such nodes drop (as "type") only those.
	MsgReportBlocks MsgType = 4
	// MsgOverride is a change of a rule's per-key override (see
	// OverrideChange).
	MsgOverride MsgType = 5
)

// Reset asks every node to forget what it knows of one key of one rule.
// It carries the strings themselves, not hashes: each node's limiter
// hashes keys with its own private seed.
type Reset struct {
	Rule string // the rule's name, at most MaxRuleBytes bytes
	Key  string // the key, at most MaxKeyBytes bytes
}

// Decoding errors. There are only these, so that Reason can label a drop
// metric with them.
var (
	ErrVersion   error = codecError("version")   // unknown format version
	ErrType      error = codecError("type")      // unknown or unexpected message type (a MsgReportBlocks of no block too)
	ErrTruncated error = codecError("truncated") // shorter than its header or counts say
	ErrTooLarge  error = codecError("too_large") // more than MaxEntries entries or MaxBlocks blocks, a block's key or a reset field over its bound
	ErrTrailing  error = codecError("trailing")  // bytes left over after the message
)

type codecError string

func (e codecError) Error() string { return "gossip: bad message: " + string(e) }

// Reason returns the metric label of a decoding error ("version", "type",
// "truncated", "too_large" or "trailing"), or "other" for any other error.
func Reason(err error) string {
	var ce codecError
	if errors.As(err, &ce) {
		return string(ce)
	}
	return "other"
}

// PeekType checks the version byte and returns the type of the message in
// b, without decoding the rest.
func PeekType(b []byte) (MsgType, error) {
	if len(b) < 2 {
		return 0, ErrTruncated
	}
	if b[0] != WireVersion {
		return 0, ErrVersion
	}
	switch t := MsgType(b[1]); t {
	case MsgReport, MsgReset, MsgLeave, MsgReportBlocks, MsgOverride:
		return t, nil
	default:
		return 0, ErrType
	}
}

// CheckReport returns an error if r cannot be encoded: a Node name longer
// than MaxNodeName bytes, more than MaxEntries entries, more than
// MaxBlocks blocks or a block's key longer than MaxBlockKeyBytes.
func CheckReport(r *Report) error {
	if len(r.Node) > MaxNodeName {
		return fmt.Errorf("gossip: node name of %d bytes, the most is %d", len(r.Node), MaxNodeName)
	}
	if len(r.Entries) > MaxEntries {
		return fmt.Errorf("gossip: report of %d entries, the most is %d", len(r.Entries), MaxEntries)
	}
	if len(r.Blocks) > MaxBlocks {
		return fmt.Errorf("gossip: report of %d blocks, the most is %d", len(r.Blocks), MaxBlocks)
	}
	for i := range r.Blocks {
		if n := len(r.Blocks[i].Key); n > MaxBlockKeyBytes {
			return fmt.Errorf("gossip: block of a %d-byte key, the most is %d", n, MaxBlockKeyBytes)
		}
	}
	return nil
}

// BlocksSize returns what blocks add to the encoded size of a report: 0
// if there are none.
func BlocksSize(blocks []Block) int {
	if len(blocks) == 0 {
		return 0
	}
	n := 2
	for i := range blocks {
		n += BlockFixed + len(blocks[i].Key)
	}
	return n
}

// ReportSize returns the encoded size of a report from node with n entries
// and no blocks (add BlocksSize for those).
func ReportSize(node string, n int) int {
	return reportFixed + len(node) + n*EntryBytes
}

// AppendReport appends the encoding of r to dst. r must pass CheckReport:
// AppendReport panics otherwise.
func AppendReport(dst []byte, r *Report) []byte {
	if err := CheckReport(r); err != nil {
		panic(err)
	}
	t := MsgReport
	if len(r.Blocks) > 0 {
		t = MsgReportBlocks
	}
	dst = append(dst, WireVersion, byte(t), byte(len(r.Node)))
	dst = append(dst, r.Node...)
	dst = binary.BigEndian.AppendUint64(dst, r.Seq)
	dst = binary.BigEndian.AppendUint32(dst, r.IntervalMillis)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Entries)))
	for i := range r.Entries {
		e := &r.Entries[i]
		dst = binary.BigEndian.AppendUint64(dst, e.Rule)
		dst = binary.BigEndian.AppendUint64(dst, e.Key)
		dst = binary.BigEndian.AppendUint32(dst, e.Limit)
		dst = binary.BigEndian.AppendUint32(dst, e.Demand)
		dst = binary.BigEndian.AppendUint32(dst, e.Admitted)
	}
	if len(r.Blocks) == 0 {
		return dst
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.Blocks)))
	for i := range r.Blocks {
		k := &r.Blocks[i]
		dst = binary.BigEndian.AppendUint64(dst, k.Rule)
		dst = binary.BigEndian.AppendUint64(dst, uint64(k.UntilMillis))
		dst = binary.BigEndian.AppendUint32(dst, k.Offences)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k.Key)))
		dst = append(dst, k.Key...)
	}
	return dst
}

// DecodeReport decodes a report message, with blocks or not. It never
// panics, and allocates no more than the length of b allows. The result
// shares no memory with b.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	t, err := PeekType(b)
	if err != nil {
		return r, err
	}
	if t != MsgReport && t != MsgReportBlocks {
		return r, ErrType
	}
	b = b[2:]
	if len(b) < 1 {
		return r, ErrTruncated
	}
	n := int(b[0])
	b = b[1:]
	if len(b) < n+8+4+2 {
		return r, ErrTruncated
	}
	r.Node = string(b[:n])
	b = b[n:]
	r.Seq = binary.BigEndian.Uint64(b)
	r.IntervalMillis = binary.BigEndian.Uint32(b[8:])
	count := int(binary.BigEndian.Uint16(b[12:]))
	b = b[14:]
	if count > MaxEntries {
		return Report{}, ErrTooLarge
	}
	if len(b) < count*EntryBytes {
		return Report{}, ErrTruncated
	}
	if t == MsgReport && len(b) > count*EntryBytes {
		return Report{}, ErrTrailing
	}
	if count > 0 {
		r.Entries = make([]Entry, count)
		for i := range r.Entries {
			e := &r.Entries[i]
			e.Rule = binary.BigEndian.Uint64(b)
			e.Key = binary.BigEndian.Uint64(b[8:])
			e.Limit = binary.BigEndian.Uint32(b[16:])
			e.Demand = binary.BigEndian.Uint32(b[20:])
			e.Admitted = binary.BigEndian.Uint32(b[24:])
			b = b[EntryBytes:]
		}
	}
	if t == MsgReportBlocks {
		var err error
		if r.Blocks, err = decodeBlocks(b); err != nil {
			return Report{}, err
		}
	}
	return r, nil
}

// decodeBlocks decodes the blocks that end a MsgReportBlocks: one at
// least, at most MaxBlocks, each key at most MaxBlockKeyBytes, and nothing
// after them.
func decodeBlocks(b []byte) ([]Block, error) {
	if len(b) < 2 {
		return nil, ErrTruncated
	}
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case count == 0:
		return nil, ErrType // it would encode as a MsgReport
	case count > MaxBlocks:
		return nil, ErrTooLarge
	case len(b) < count*BlockFixed:
		return nil, ErrTruncated
	}
	blocks := make([]Block, count)
	for i := range blocks {
		if len(b) < BlockFixed {
			return nil, ErrTruncated
		}
		k := &blocks[i]
		k.Rule = binary.BigEndian.Uint64(b)
		k.UntilMillis = int64(binary.BigEndian.Uint64(b[8:]))
		k.Offences = binary.BigEndian.Uint32(b[16:])
		n := int(binary.BigEndian.Uint16(b[20:]))
		b = b[BlockFixed:]
		if n > MaxBlockKeyBytes {
			return nil, ErrTooLarge
		}
		if len(b) < n {
			return nil, ErrTruncated
		}
		k.Key = string(b[:n])
		b = b[n:]
	}
	if len(b) > 0 {
		return nil, ErrTrailing
	}
	return blocks, nil
}

// AppendReset appends the encoding of a reset message to dst. It returns
// dst unchanged and an error if r.Rule is longer than MaxRuleBytes or
// r.Key longer than MaxKeyBytes.
func AppendReset(dst []byte, r Reset) ([]byte, error) {
	return appendNamed(dst, MsgReset, r.Rule, "key", r.Key)
}

// DecodeReset decodes a reset message. It never panics, and rejects a
// rule or key longer than MaxRuleBytes or MaxKeyBytes (ErrTooLarge). The
// result shares no memory with b.
func DecodeReset(b []byte) (Reset, error) {
	rule, key, err := decodeNamed(b, MsgReset)
	return Reset{Rule: rule, Key: key}, err
}

// appendNamed appends a message of type t that names a rule and carries
// one string of at most MaxKeyBytes (what, for the error): a reset's key,
// an override's change.
func appendNamed(dst []byte, t MsgType, rule, what, s string) ([]byte, error) {
	if len(rule) > MaxRuleBytes {
		return dst, fmt.Errorf("gossip: rule name of %d bytes, the most is %d", len(rule), MaxRuleBytes)
	}
	if len(s) > MaxKeyBytes {
		return dst, fmt.Errorf("gossip: %s of %d bytes, the most is %d", what, len(s), MaxKeyBytes)
	}
	dst = append(dst, WireVersion, byte(t))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(rule)))
	dst = append(dst, rule...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...), nil
}

// decodeNamed decodes what appendNamed wrote, of type t.
func decodeNamed(b []byte, t MsgType) (rule, s string, err error) {
	got, err := PeekType(b)
	if err != nil {
		return "", "", err
	}
	if got != t {
		return "", "", ErrType
	}
	b = b[2:]
	if len(b) < 2 {
		return "", "", ErrTruncated
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n > MaxRuleBytes {
		return "", "", ErrTooLarge
	}
	if len(b) < n+2 {
		return "", "", ErrTruncated
	}
	r := b[:n]
	b = b[n:]
	n = int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n > MaxKeyBytes {
		return "", "", ErrTooLarge
	}
	if len(b) < n {
		return "", "", ErrTruncated
	}
	if len(b) > n {
		return "", "", ErrTrailing
	}
	return string(r), string(b), nil
}

// AppendLeave appends a leave message for node (at most MaxNodeName
// bytes, or AppendLeave panics) to dst.
func AppendLeave(dst []byte, node string) []byte {
	if len(node) > MaxNodeName {
		panic(fmt.Sprintf("gossip: node name of %d bytes, the most is %d", len(node), MaxNodeName))
	}
	dst = append(dst, WireVersion, byte(MsgLeave), byte(len(node)))
	return append(dst, node...)
}

// DecodeLeave decodes a leave message and returns the node name in it.
func DecodeLeave(b []byte) (string, error) {
	t, err := PeekType(b)
	if err != nil {
		return "", err
	}
	if t != MsgLeave {
		return "", ErrType
	}
	if len(b) < 3 || len(b) < 3+int(b[2]) {
		return "", ErrTruncated
	}
	if len(b) > 3+int(b[2]) {
		return "", ErrTrailing
	}
	return string(b[3:]), nil
}

// SplitReport splits r into reports whose encodings are each at most
// maxBytes long, in order, each with r's Node, Seq and IntervalMillis: a
// receiver must treat parts with the same Node and Seq as one report
// (merge them), not as repeats. The entries come first, in parts without
// blocks (MsgReport: a node that knows no blocks reads them all); an empty
// report is one part with no entries. Then r's blocks, in parts of their
// own without entries (MsgReportBlocks), packed in order; a block too
// large for a part alone is left out. SplitReport returns nil if not even
// a part with one entry fits in maxBytes. The parts share r's Entries and
// Blocks arrays.
func SplitReport(r *Report, maxBytes int) []Report {
	parts := splitEntries(r, maxBytes)
	if parts == nil || len(r.Blocks) == 0 {
		return parts
	}
	head := *r
	head.Entries = nil
	for i := 0; i < len(r.Blocks); {
		size := ReportSize(r.Node, 0) + 2
		j := i
		for j < len(r.Blocks) && j-i < MaxBlocks {
			n := BlockFixed + len(r.Blocks[j].Key)
			if size+n > maxBytes {
				break
			}
			size += n
			j++
		}
		if j == i { // too large alone
			i++
			continue
		}
		p := head
		p.Blocks = r.Blocks[i:j:j]
		parts = append(parts, p)
		i = j
	}
	return parts
}

// splitEntries is SplitReport for r's entries alone.
func splitEntries(r *Report, maxBytes int) []Report {
	head := *r
	head.Blocks = nil
	per := (maxBytes - ReportSize(r.Node, 0)) / EntryBytes
	if per > MaxEntries {
		per = MaxEntries
	}
	if per < 1 {
		if len(r.Entries) == 0 && ReportSize(r.Node, 0) <= maxBytes {
			return []Report{head}
		}
		return nil
	}
	if len(r.Entries) <= per {
		return []Report{head}
	}
	parts := make([]Report, 0, (len(r.Entries)+per-1)/per)
	for i := 0; i < len(r.Entries); i += per {
		j := min(i+per, len(r.Entries))
		p := head
		p.Entries = r.Entries[i:j:j]
		parts = append(parts, p)
	}
	return parts
}

// Packet overhead that memberlist adds around a user message sent with
// SendBestEffort (memberlist v0.7.0, net.go rawSendMsgPacket and
// transport.go labelWrappedTransport): 1 byte of message type, 5 of CRC
// (for peers speaking protocol ≥ 5), at most 45 of AES-GCM encryption
// (version 0: 1 version + 12 nonce + 16 padding + 16 tag; version 1 needs
// 29), and 2+len(label) of label header. Compression is turned off by
// New, so it adds nothing.
const (
	userMsgOverhead = 1
	crcOverhead     = 5
	encryptOverhead = 45
)

// MaxMessageBytes returns the largest user message that still fits in a
// packet of packetBytes (memberlist's UDPBufferSize, 1400 by default) once
// memberlist has framed, checksummed, encrypted and labelled it.
func MaxMessageBytes(packetBytes int, label string, encrypted bool) int {
	n := packetBytes - userMsgOverhead - crcOverhead
	if encrypted {
		n -= encryptOverhead
	}
	if label != "" {
		n -= 2 + len(label)
	}
	return n
}
