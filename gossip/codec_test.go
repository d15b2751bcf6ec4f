package gossip

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleReport(n int) Report {
	r := Report{Node: "node-a:7946", Seq: 42, IntervalMillis: 100}
	for i := 0; i < n; i++ {
		r.Entries = append(r.Entries, Entry{
			Rule: KeyHash("api"), Key: KeyHash("10.0.0."+string(rune('a'+i%26))) + uint64(i),
			Limit: 1000, Demand: uint32(i * 3), Admitted: uint32(i),
		})
	}
	return r
}

func TestReportRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 7, MaxEntries} {
		r := sampleReport(n)
		b := AppendReport(nil, &r)
		if len(b) != ReportSize(r.Node, n) {
			t.Fatalf("n=%d: size %d, ReportSize says %d", n, len(b), ReportSize(r.Node, n))
		}
		if typ, err := PeekType(b); err != nil || typ != MsgReport {
			t.Fatalf("PeekType = %v, %v", typ, err)
		}
		got, err := DecodeReport(b)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("n=%d: round trip differs", n)
		}
	}
}

// resetMsg encodes r, which must be within bounds.
func resetMsg(tb testing.TB, r Reset) []byte {
	tb.Helper()
	b, err := AppendReset(nil, r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestResetLeaveRoundTrip(t *testing.T) {
	for _, rs := range []Reset{
		{},
		{Rule: "api", Key: "10.0.0.1"},
		{Rule: "", Key: "k"},
		{Rule: "r", Key: ""},
		{Rule: "ünï", Key: "\x00\xff\xfe not UTF-8"},
		{Rule: strings.Repeat("r", MaxRuleBytes), Key: strings.Repeat("k", MaxKeyBytes)},
	} {
		b := resetMsg(t, rs)
		if want := 2 + 2 + len(rs.Rule) + 2 + len(rs.Key); len(b) != want {
			t.Fatalf("reset %.20q: %d bytes, want %d", rs, len(b), want)
		}
		if typ, err := PeekType(b); err != nil || typ != MsgReset {
			t.Fatalf("PeekType = %v, %v", typ, err)
		}
		if got, err := DecodeReset(b); err != nil || got != rs {
			t.Fatalf("reset %.20q: got %.20q, %v", rs, got, err)
		}
	}
	b := resetMsg(t, Reset{Rule: "api", Key: "10.0.0.1"})
	want := []byte{WireVersion, byte(MsgReset), 0, 3, 'a', 'p', 'i', 0, 8, '1', '0', '.', '0', '.', '0', '.', '1'}
	if !bytes.Equal(b, want) {
		t.Fatalf("reset layout:\n got %x\nwant %x", b, want)
	}
	prefix := []byte("prefix")
	b, err := AppendReset(prefix, Reset{Rule: "api", Key: "10.0.0.1"})
	if err != nil || !bytes.Equal(b, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendReset to a prefix: %x, %v", b, err)
	}
	b = AppendLeave(nil, "n1")
	if got, err := DecodeLeave(b); err != nil || got != "n1" {
		t.Fatalf("leave: %q, %v", got, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	r := sampleReport(2)
	good := AppendReport(nil, &r)
	tooMany := AppendReport(nil, &Report{Node: "x"})
	tooMany[len(tooMany)-2], tooMany[len(tooMany)-1] = 0x10, 0x01 // 4097 entries
	bigCount := AppendReport(nil, &Report{Node: "x"})
	bigCount[len(bigCount)-2], bigCount[len(bigCount)-1] = 0x0f, 0xff // 4095 entries, no bytes
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"one byte", []byte{1}, ErrTruncated},
		{"version", append([]byte{2}, good[1:]...), ErrVersion},
		{"type", []byte{1, 9, 0}, ErrType},
		{"reset as report", resetMsg(t, Reset{}), ErrType},
		{"cut in header", good[:10], ErrTruncated},
		{"cut in entries", good[:len(good)-1], ErrTruncated},
		{"trailing", append(append([]byte{}, good...), 0), ErrTrailing},
		{"too many", tooMany, ErrTooLarge},
		{"count beyond bytes", bigCount, ErrTruncated},
		{"node beyond bytes", []byte{1, 1, 200, 'a'}, ErrTruncated},
	} {
		_, err := DecodeReport(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := DecodeLeave([]byte{1, 3, 2, 'a'}); !errors.Is(err, ErrTruncated) {
		t.Errorf("leave truncated: %v", err)
	}
	if got := Reason(ErrTooLarge); got != "too_large" {
		t.Errorf("Reason = %q", got)
	}
	if got := Reason(errors.New("x")); got != "other" {
		t.Errorf("Reason = %q", got)
	}
}

func TestAppendResetBounds(t *testing.T) {
	dst := []byte("dst")
	for _, rs := range []Reset{
		{Rule: strings.Repeat("r", MaxRuleBytes+1), Key: "k"},
		{Rule: "r", Key: strings.Repeat("k", MaxKeyBytes+1)},
		{Rule: strings.Repeat("r", 1<<16), Key: strings.Repeat("k", 1<<16)}, // would wrap a u16
	} {
		b, err := AppendReset(dst, rs)
		if err == nil {
			t.Errorf("reset of %d+%d bytes accepted", len(rs.Rule), len(rs.Key))
		}
		if string(b) != "dst" {
			t.Errorf("refused reset changed dst to %q", b)
		}
	}
}

func TestDecodeResetErrors(t *testing.T) {
	good := resetMsg(t, Reset{Rule: "api", Key: "10.0.0.1"})
	r := sampleReport(1)
	for i := range good {
		if _, err := DecodeReset(good[:i]); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut to %d bytes: %v, want %v", i, err, ErrTruncated)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"version", append([]byte{2}, good[1:]...), ErrVersion},
		{"unknown type", append([]byte{1, 9}, good[2:]...), ErrType},
		{"report as reset", AppendReport(nil, &r), ErrType},
		{"leave as reset", AppendLeave(nil, "n"), ErrType},
		{"trailing", append(append([]byte{}, good...), 0), ErrTrailing},
		{"trailing after empty", []byte{1, 2, 0, 0, 0, 0, 'x'}, ErrTrailing},
		{"rule beyond bytes", []byte{1, 2, 0, 5, 'a', 'p', 'i'}, ErrTruncated},
		{"key beyond bytes", []byte{1, 2, 0, 1, 'r', 0, 5, 'k'}, ErrTruncated},
		{"no key length", []byte{1, 2, 0, 1, 'r', 0}, ErrTruncated},
		{"rule too long", []byte{1, 2, 0x01, 0x00}, ErrTooLarge},
		{"rule 0xffff", append([]byte{1, 2, 0xff, 0xff}, make([]byte, 0xffff+2)...), ErrTooLarge},
		{"key too long", []byte{1, 2, 0, 1, 'r', 0x10, 0x01}, ErrTooLarge},
		{"key 0xffff", append([]byte{1, 2, 0, 0, 0xff, 0xff}, make([]byte, 0xffff)...), ErrTooLarge},
	} {
		got, err := DecodeReset(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if got != (Reset{}) {
			t.Errorf("%s: returned %.20q with the error", tc.name, got)
		}
	}
	if got := Reason(ErrTooLarge); got != "too_large" {
		t.Errorf("Reason = %q", got)
	}
}

func TestCheckReport(t *testing.T) {
	if err := CheckReport(&Report{Node: string(make([]byte, 256))}); err == nil {
		t.Error("256-byte node name accepted")
	}
	r := sampleReport(MaxEntries + 1)
	if err := CheckReport(&r); err == nil {
		t.Error("too many entries accepted")
	}
}

func TestSplitReport(t *testing.T) {
	budget := MaxMessageBytes(1400, "edgelimit", true)
	if budget != 1400-1-5-45-11 {
		t.Fatalf("budget %d", budget)
	}
	r := sampleReport(1000)
	parts := SplitReport(&r, budget)
	var joined []Entry
	for _, p := range parts {
		if p.Node != r.Node || p.Seq != r.Seq || p.IntervalMillis != r.IntervalMillis {
			t.Fatal("part header differs")
		}
		if n := len(AppendReport(nil, &p)); n > budget {
			t.Fatalf("part of %d bytes > %d", n, budget)
		}
		joined = append(joined, p.Entries...)
	}
	if !reflect.DeepEqual(joined, r.Entries) {
		t.Fatal("parts do not add up to the report")
	}
	per := (budget - ReportSize(r.Node, 0)) / EntryBytes
	if want := (1000 + per - 1) / per; len(parts) != want {
		t.Fatalf("%d parts, want %d", len(parts), want)
	}
	empty := Report{Node: "n"}
	if got := SplitReport(&empty, budget); len(got) != 1 {
		t.Fatalf("empty report: %d parts", len(got))
	}
	if got := SplitReport(&r, ReportSize(r.Node, 0)+EntryBytes-1); got != nil {
		t.Fatalf("impossible budget: %d parts", len(got))
	}
}

func FuzzDecode(f *testing.F) {
	r := sampleReport(3)
	f.Add(AppendReport(nil, &r))
	f.Add(AppendReport(nil, &Report{}))
	f.Add(resetMsg(f, Reset{Rule: "api", Key: "10.0.0.1"}))
	f.Add(resetMsg(f, Reset{}))
	f.Add(resetMsg(f, Reset{Rule: strings.Repeat("r", MaxRuleBytes), Key: strings.Repeat("k", MaxKeyBytes)}))
	f.Add(AppendLeave(nil, "node"))
	om, _ := AppendOverride(nil, OverrideChange{Rule: "api", Change: []byte("change")})
	f.Add(om)
	br := sampleBlockReport(2, 3)
	f.Add(AppendReport(nil, &br))
	f.Add([]byte{1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Add([]byte{1, 2, 0x01, 0x00, 'r'})                // rule length over MaxRuleBytes
	f.Add([]byte{1, 2, 0, 1, 'r', 0x10, 0x01, 'k'})     // key length over MaxKeyBytes
	f.Add([]byte{1, 2, 0, 3, 'a', 'p', 'i', 0, 9, 'k'}) // key beyond the bytes
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := PeekType(b)
		if err != nil {
			return
		}
		var out []byte
		switch typ {
		case MsgReport, MsgReportBlocks:
			r, err := DecodeReport(b)
			if err != nil {
				return
			}
			if len(r.Entries) > MaxEntries || len(r.Node) > MaxNodeName || len(r.Blocks) > MaxBlocks || (typ == MsgReportBlocks) != (len(r.Blocks) > 0) {
				t.Fatal("limits not enforced")
			}
			for _, k := range r.Blocks {
				if len(k.Key) > MaxBlockKeyBytes {
					t.Fatal("block key limit not enforced")
				}
			}
			out = AppendReport(nil, &r)
		case MsgReset:
			r, err := DecodeReset(b)
			if err != nil {
				return
			}
			if len(r.Rule) > MaxRuleBytes || len(r.Key) > MaxKeyBytes {
				t.Fatal("limits not enforced")
			}
			if out, err = AppendReset(nil, r); err != nil {
				t.Fatalf("decoded reset does not encode: %v", err)
			}
		case MsgOverride:
			o, err := DecodeOverride(b)
			if err != nil {
				return
			}
			if out, err = AppendOverride(nil, o); err != nil {
				t.Fatalf("decoded override does not encode: %v", err)
			}
		case MsgLeave:
			n, err := DecodeLeave(b)
			if err != nil {
				return
			}
			out = AppendLeave(nil, n)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, out)
		}
	})
}
