package gossip

import (
	"bytes"
	"errors"
	"reflect"
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

func TestResetLeaveRoundTrip(t *testing.T) {
	rs := Reset{Rule: 1, Key: 1<<64 - 1}
	b := AppendReset(nil, rs)
	if got, err := DecodeReset(b); err != nil || got != rs {
		t.Fatalf("reset: %v, %v", got, err)
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
		{"reset as report", AppendReset(nil, Reset{}), ErrType},
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
	if _, err := DecodeReset(append(AppendReset(nil, Reset{}), 0)); !errors.Is(err, ErrTrailing) {
		t.Errorf("reset trailing: %v", err)
	}
	if _, err := DecodeReset(AppendReset(nil, Reset{})[:17]); !errors.Is(err, ErrTruncated) {
		t.Errorf("reset truncated: %v", err)
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
	f.Add(AppendReset(nil, Reset{Rule: 5, Key: 6}))
	f.Add(AppendLeave(nil, "node"))
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := PeekType(b)
		if err != nil {
			return
		}
		var out []byte
		switch typ {
		case MsgReport:
			r, err := DecodeReport(b)
			if err != nil {
				return
			}
			if len(r.Entries) > MaxEntries || len(r.Node) > MaxNodeName {
				t.Fatal("limits not enforced")
			}
			out = AppendReport(nil, &r)
		case MsgReset:
			r, err := DecodeReset(b)
			if err != nil {
				return
			}
			out = AppendReset(nil, r)
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
