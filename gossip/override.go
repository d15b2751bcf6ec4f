package gossip

import (
	"errors"
	"fmt"
	"sync"
)

// Overrides (a rule's per-key factors set by an operator) travel as
// messages of their own, one a change, sent over TCP to every live member
// at once as resets are: they are rare and must not be lost. The change
// is opaque here (package limiter encodes it, with its version, so that
// of two changes of a key the later wins wherever they meet). A member
// that joins later, or is partitioned away, does not get it.

// OverrideChange is a change of one of a rule's overrides.
type OverrideChange struct {
	Rule   string // the rule's name, at most MaxRuleBytes bytes
	Change []byte // the change as the rule's owner encodes it, at most MaxKeyBytes bytes
}

// AppendOverride appends the encoding of an override message to dst. It
// returns dst unchanged and an error if o.Rule is longer than
// MaxRuleBytes or o.Change longer than MaxKeyBytes.
func AppendOverride(dst []byte, o OverrideChange) ([]byte, error) {
	return appendNamed(dst, MsgOverride, o.Rule, "override change", string(o.Change))
}

// DecodeOverride decodes an override message. It never panics; the
// result shares no memory with b.
func DecodeOverride(b []byte) (OverrideChange, error) {
	rule, change, err := decodeNamed(b, MsgOverride)
	return OverrideChange{Rule: rule, Change: []byte(change)}, err
}

// BroadcastOverride sends o to every other live member (not to this
// node's OnOverride), over TCP, and waits for all of them, at most
// memberlist's TCPTimeout; it returns the errors of those it could not
// reach.
func (c *Cluster) BroadcastOverride(o OverrideChange) error {
	msg, err := AppendOverride(nil, o)
	if err != nil {
		return err
	}
	return c.sendReliable(msg, "override")
}

// sendReliable sends msg over TCP to every other live member at once,
// and returns the errors of those it could not reach (what names msg in
// them).
func (c *Cluster) sendReliable(msg []byte, what string) error {
	nodes := c.others()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			if err := c.ml.SendReliable(n, msg); err != nil {
				c.sendErrors.Add(1)
				errs[i] = fmt.Errorf("gossip: send %s to %s: %w", what, n.Name, err)
				return
			}
			c.sent.Add(1)
			c.sentBytes.Add(uint64(len(msg)))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
