package gossip

import (
	"time"
)

// Blocks travel with the reports (Report.Blocks). A node publishes each
// block it makes (PublishBlock) and repeats it in its reports while it
// runs, so that a node that joins, restarts or comes back from a partition
// learns the blocks in force: blocks learnt from others are not relayed,
// the node that made a block is its only source. Each report carries
// first the blocks published or changed since the last one, then, round
// robin, the other running blocks, up to SharingConfig.BlockBytes of
// encoded blocks (at least one block): with IP keys (under 40 bytes, 60
// bytes a block) the default of 8 KiB carries about 130 blocks a report,
// so a node learns R running blocks within ⌈R/130⌉ sync intervals. Blocks
// published at once beyond what a report carries go out over the next
// ones, new ones first.

// blockID names a published block.
type blockID struct {
	rule uint64
	key  string
}

// published is a block this node made, while it runs.
type published struct {
	untilMillis int64
	offences    uint32
	sent        uint64 // the Seq of the last report that carried it
	queued      bool   // in Sharing.fresh
	withdrawn   bool   // to forget at the next report
}

// Defaults of SharingConfig's block bounds.
const (
	DefaultBlockBytes = 8 << 10
	DefaultMaxBlocks  = 10_000
)

// PublishBlock tells the other nodes that this node blocked key of the
// rule (KeyHash of its name) until until, the key's offences-th block: the
// block goes in the next report, and in later ones while it runs. Publishing
// a key again keeps the later end and the higher count, and sends it anew.
// A key longer than MaxBlockKeyBytes, or a new block past MaxBlocks
// running blocks, is not published, and counted
// (SharingStats.BlocksRefused); a block is forgotten once it has ended.
func (s *Sharing) PublishBlock(rule uint64, key string, until time.Time, offences int) {
	ms := ceilMillis(until)
	if len(key) > MaxBlockKeyBytes || offences < 0 {
		s.blocksRefused.Add(1)
		return
	}
	id := blockID{rule, key}
	s.bmu.Lock()
	defer s.bmu.Unlock()
	p := s.pub[id]
	if p == nil {
		if len(s.pub) >= s.cfg.MaxBlocks {
			s.blocksRefused.Add(1)
			return
		}
		p = &published{}
		s.pub[id] = p
		s.order = append(s.order, id)
	}
	if p.withdrawn {
		*p = published{}
	}
	p.untilMillis = max(p.untilMillis, ms)
	p.offences = max(p.offences, uint32(min(offences, 1<<32-1)))
	if !p.queued {
		p.queued = true
		s.fresh = append(s.fresh, id)
	}
}

// WithdrawBlock stops publishing the block of key of the rule (a block
// lifted by the admin API). The nodes that learnt it keep it until the
// reset reaches them (Cluster.BroadcastReset).
func (s *Sharing) WithdrawBlock(rule uint64, key string) {
	s.bmu.Lock()
	if p := s.pub[blockID{rule, key}]; p != nil {
		p.withdrawn = true
	}
	s.bmu.Unlock()
}

// appendBlocks adds to r, whose Seq is set, the blocks it should carry at
// now: the fresh ones, then the others round robin, within BlockBytes. It
// forgets the blocks that have ended.
func (s *Sharing) appendBlocks(r *Report, now time.Time) {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	if len(s.pub) == 0 {
		s.order, s.fresh, s.cursor = s.order[:0], s.fresh[:0], 0
		return
	}
	nowMs := now.UnixMilli()
	// forget what has ended or was withdrawn, keeping the round's place
	kept, cursor := s.order[:0], 0
	for i, id := range s.order {
		if p := s.pub[id]; p != nil && !p.withdrawn && p.untilMillis > nowMs {
			if i < s.cursor {
				cursor++
			}
			kept = append(kept, id)
		} else if p != nil {
			delete(s.pub, id)
		}
	}
	clear(s.order[len(kept):])
	s.order, s.cursor = kept, cursor
	budget := s.cfg.BlockBytes
	add := func(id blockID) bool {
		p := s.pub[id]
		if p == nil || p.withdrawn || p.sent == r.Seq {
			return true
		}
		n := BlockFixed + len(id.key)
		if len(r.Blocks) >= MaxBlocks || n > budget && len(r.Blocks) > 0 {
			return false
		}
		budget -= n
		p.sent, p.queued = r.Seq, false
		r.Blocks = append(r.Blocks, Block{Rule: id.rule, Key: id.key, UntilMillis: p.untilMillis, Offences: p.offences})
		return true
	}
	i := 0
	for ; i < len(s.fresh) && add(s.fresh[i]); i++ {
	}
	s.fresh = append(s.fresh[:0], s.fresh[i:]...) // those left go first next time
	for range len(s.order) {
		if s.cursor >= len(s.order) {
			s.cursor = 0
		}
		if !add(s.order[s.cursor]) {
			break
		}
		s.cursor++
	}
}

// takeBlocks hands the blocks of a report from another node to OnBlock,
// outside every lock; blocks of rules not shared here are counted
// (SharingStats.UnknownRules) and dropped.
func (s *Sharing) takeBlocks(r *Report, rules map[uint64]Rule) {
	if len(r.Blocks) == 0 || r.Node == s.cfg.Self {
		return
	}
	for _, b := range r.Blocks {
		if _, ok := rules[b.Rule]; !ok {
			s.unknown.Add(1)
			continue
		}
		s.blocksRecv.Add(1)
		if s.cfg.OnBlock != nil {
			s.cfg.OnBlock(b.Rule, b.Key, time.UnixMilli(b.UntilMillis), int(b.Offences))
		}
	}
}

// publishedBlocks is the number of blocks this node publishes.
func (s *Sharing) publishedBlocks() int {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	return len(s.pub)
}

// ceilMillis is t in Unix milliseconds, rounded up: a block never ends
// earlier elsewhere than here.
func ceilMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}
