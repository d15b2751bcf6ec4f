package gossip

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleBlockReport(entries, blocks int) Report {
	r := sampleReport(entries)
	for i := range blocks {
		r.Blocks = append(r.Blocks, Block{Rule: KeyHash("api"), Key: fmt.Sprintf("10.0.0.%d", i), UntilMillis: 1_767_225_600_000 + int64(i), Offences: uint32(i + 1)})
	}
	return r
}

func TestBlockReportRoundTrip(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {3, 2}, {0, MaxBlocks}} {
		r := sampleBlockReport(c[0], c[1])
		b := AppendReport(nil, &r)
		if len(b) != ReportSize(r.Node, c[0])+BlocksSize(r.Blocks) {
			t.Fatalf("%v: size %d, want %d", c, len(b), ReportSize(r.Node, c[0])+BlocksSize(r.Blocks))
		}
		if typ, _ := PeekType(b); typ != MsgReportBlocks {
			t.Fatalf("type %d", typ)
		}
		got, err := DecodeReport(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("%v: round trip: %v", c, err)
		}
	}
	long := Report{Node: "n", Blocks: []Block{{Key: strings.Repeat("k", MaxBlockKeyBytes), UntilMillis: -1}}}
	if got, err := DecodeReport(AppendReport(nil, &long)); err != nil || !reflect.DeepEqual(got, long) {
		t.Fatalf("longest key: %v", err)
	}
	if err := CheckReport(&Report{Blocks: []Block{{Key: strings.Repeat("k", MaxBlockKeyBytes+1)}}}); err == nil {
		t.Error("a key over MaxBlockKeyBytes accepted")
	}
	if err := CheckReport(&Report{Blocks: make([]Block, MaxBlocks+1)}); err == nil {
		t.Error("more than MaxBlocks accepted")
	}
}

func TestDecodeBlockErrors(t *testing.T) {
	r := sampleBlockReport(1, 2)
	good := AppendReport(nil, &r)
	noBlocks := AppendReport(nil, &Report{Node: "x"})
	noBlocks[1] = byte(MsgReportBlocks)
	zero := append(append([]byte{}, noBlocks...), 0, 0)
	tooMany := append(append([]byte{}, noBlocks...), 0x04, 0x01) // 1025
	longKey := append(append([]byte{}, noBlocks...), 0, 1)
	longKey = append(longKey, make([]byte, 20)...)
	longKey = append(longKey, 0x04, 0x01) // 1025 bytes of key
	longKey = append(longKey, make([]byte, 1025)...)
	fewBytes := append(append([]byte{}, noBlocks...), 0x03, 0xff) // 1023 blocks, none there
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"no block count", noBlocks, ErrTruncated},
		{"zero blocks", zero, ErrType},
		{"too many", tooMany, ErrTooLarge},
		{"key too long", longKey, ErrTooLarge},
		{"count beyond bytes", fewBytes, ErrTruncated},
		{"cut in a key", good[:len(good)-1], ErrTruncated},
		{"cut in a block", good[:len(good)-10-BlockFixed], ErrTruncated},
		{"trailing", append(append([]byte{}, good...), 0), ErrTrailing},
	} {
		got, err := DecodeReport(tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && !reflect.DeepEqual(got, Report{}) {
			t.Errorf("%s: a report returned with the error", tc.name)
		}
	}
	for i := range good {
		if _, err := DecodeReport(good[:i]); err == nil {
			t.Fatalf("cut to %d bytes: decoded", i)
		}
	}
}

// Entries go in MsgReport parts, blocks in parts of their own; each fits,
// and together they are the report. A block of the longest key fits a
// packet with the default label and encryption.
func TestSplitReportBlocks(t *testing.T) {
	budget := MaxMessageBytes(1400, "edgelimit", true)
	r := sampleBlockReport(100, 300)
	r.Blocks = append(r.Blocks, Block{Rule: 1, Key: strings.Repeat("k", MaxBlockKeyBytes)}, Block{Rule: 2, Key: "after"})
	parts := SplitReport(&r, budget)
	var entries []Entry
	var blocks []Block
	for i, p := range parts {
		b := AppendReport(nil, &p)
		if len(b) > budget {
			t.Fatalf("part %d: %d bytes > %d", i, len(b), budget)
		}
		if len(p.Entries) > 0 && len(p.Blocks) > 0 {
			t.Fatalf("part %d mixes entries and blocks", i)
		}
		if typ, _ := PeekType(b); (typ == MsgReportBlocks) != (len(p.Blocks) > 0) {
			t.Fatalf("part %d: type %d", i, typ)
		}
		entries = append(entries, p.Entries...)
		blocks = append(blocks, p.Blocks...)
	}
	if !reflect.DeepEqual(entries, r.Entries) || !reflect.DeepEqual(blocks, r.Blocks) {
		t.Fatal("parts do not add up to the report")
	}
	// a block too large for any part is left out, the others kept (in
	// parts of their own either side of it)
	parts = SplitReport(&Report{Node: "n", Blocks: []Block{{Key: "a"}, {Key: strings.Repeat("k", 1000)}, {Key: "b"}}}, 200)
	if len(parts) != 3 || len(parts[0].Blocks) != 0 || parts[1].Blocks[0].Key != "a" || parts[2].Blocks[0].Key != "b" {
		t.Fatalf("oversized block: %+v", parts)
	}
}

var blockRule = KeyHash("api")

func newBlockSharing(self string, cfg SharingConfig, got *[]string) *Sharing {
	cfg.Self = self
	if got != nil {
		cfg.OnBlock = func(rule uint64, key string, until time.Time, offences int) {
			*got = append(*got, fmt.Sprintf("%x %s %d %d", rule, key, until.UnixMilli(), offences))
		}
	}
	s := NewSharing(cfg)
	s.SetRules([]Rule{{Name: "api", Window: time.Second, Demand: func(string) uint64 { return 0 }}})
	return s
}

func blockKeys(r Report) []string {
	var out []string
	for _, b := range r.Blocks {
		out = append(out, fmt.Sprintf("%s/%d/%d", b.Key, b.UntilMillis, b.Offences))
	}
	return out
}

// A published block is in every report while it runs, then forgotten;
// published again, the later end and higher count win; withdrawn, it
// stops.
func TestPublishBlock(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	s := newBlockSharing("a", SharingConfig{}, nil)
	s.PublishBlock(blockRule, "k", now.Add(time.Second+time.Nanosecond), 1) // rounded up
	want := []string{"k/1767225601001/1"}
	for i := range 3 {
		if got := blockKeys(s.Tick(now.Add(time.Duration(i) * 100 * time.Millisecond))); !reflect.DeepEqual(got, want) {
			t.Fatalf("tick %d: %v, want %v", i, got, want)
		}
	}
	s.PublishBlock(blockRule, "k", now.Add(time.Millisecond), 3)
	if got := blockKeys(s.Tick(now.Add(time.Second))); !reflect.DeepEqual(got, []string{"k/1767225601001/3"}) {
		t.Fatalf("republished: %v", got)
	}
	if got := s.Tick(now.Add(time.Second + time.Millisecond)); len(got.Blocks) != 0 {
		t.Fatalf("after its end: %v", blockKeys(got))
	}
	if st := s.Stats(now); st.BlocksPublished != 0 {
		t.Fatalf("published %d after the end", st.BlocksPublished)
	}
	s.PublishBlock(blockRule, "j", now.Add(time.Hour), 1)
	s.WithdrawBlock(blockRule, "j")
	if got := s.Tick(now.Add(2 * time.Second)); len(got.Blocks) != 0 {
		t.Fatalf("withdrawn: %v", blockKeys(got))
	}
	s.PublishBlock(blockRule, "j", now.Add(time.Hour), 1)
	if got := s.Tick(now.Add(3 * time.Second)); len(got.Blocks) != 1 {
		t.Fatalf("published after a withdrawal: %v", blockKeys(got))
	}
	s.PublishBlock(blockRule, strings.Repeat("k", MaxBlockKeyBytes+1), now.Add(time.Hour), 1)
	if st := s.Stats(now); st.BlocksRefused != 1 {
		t.Fatalf("refused %d, want 1", st.BlocksRefused)
	}
}

// With more blocks than a report carries, new blocks go first and the
// others take turns: each is carried within ⌈R/per⌉ reports.
func TestPublishBlockRoundRobin(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	per := 10
	s := newBlockSharing("a", SharingConfig{BlockBytes: per * (BlockFixed + 3), MaxBlocks: 50}, nil)
	for i := range 45 {
		s.PublishBlock(blockRule, fmt.Sprintf("k%02d", i), now.Add(time.Hour), 1)
	}
	s.PublishBlock(blockRule, "o00", now.Add(time.Hour), 1) // fits: 46 ≤ 50
	for i := range 4 {
		s.PublishBlock(blockRule, fmt.Sprintf("x%02d", i), now.Add(time.Hour), 1)
	}
	s.PublishBlock(blockRule, "refused", now.Add(time.Hour), 1)
	if st := s.Stats(now); st.BlocksRefused != 1 || st.BlocksPublished != 50 {
		t.Fatalf("stats %+v", st)
	}
	seen := map[string]int{}
	for tick := range 10 {
		r := s.Tick(now.Add(time.Duration(tick) * time.Millisecond))
		if len(r.Blocks) > per+1 || len(r.Blocks) == 0 {
			t.Fatalf("tick %d: %d blocks", tick, len(r.Blocks))
		}
		for _, b := range r.Blocks {
			seen[b.Key]++
		}
		if tick == 4 && len(seen) != 50 {
			t.Fatalf("after 5 reports, %d blocks sent, want 50", len(seen))
		}
	}
	for k, n := range seen {
		if n < 2 {
			t.Errorf("%s sent %d times in 10 reports", k, n)
		}
	}
	// a fresh block goes in the next report, ahead of the round
	s.WithdrawBlock(blockRule, "k00")
	s.Tick(now.Add(time.Second))
	s.PublishBlock(blockRule, "new", now.Add(time.Hour), 1)
	if r := s.Tick(now.Add(2 * time.Second)); r.Blocks[0].Key != "new" {
		t.Fatalf("fresh block not first: %v", blockKeys(r))
	}
}

// Observe hands the blocks of others to OnBlock, for rules shared here;
// not this node's own, nor unknown rules' (counted).
func TestObserveBlocks(t *testing.T) {
	var got []string
	s := newBlockSharing("b", SharingConfig{}, &got)
	now := time.UnixMilli(1_767_225_600_000)
	r := Report{Node: "a", Seq: 1, Blocks: []Block{{Rule: blockRule, Key: "k", UntilMillis: now.UnixMilli() + 5, Offences: 2}, {Rule: 99, Key: "x"}}}
	s.Observe(r, now)
	s.Observe(Report{Node: "b", Seq: 1, Blocks: r.Blocks}, now) // its own
	want := []string{fmt.Sprintf("%x k %d 2", blockRule, now.UnixMilli()+5)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OnBlock: %v, want %v", got, want)
	}
	if st := s.Stats(now); st.UnknownRules != 1 || st.BlocksReceived != 1 || st.Live != 2 {
		t.Fatalf("stats %+v", st)
	}
}
