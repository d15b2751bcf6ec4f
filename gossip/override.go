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
// that joins later, restarts, or comes back from a partition learns them
// when it sees the others join: it asks each (AskOverrides), and each
// sends it its overrides in force (SendOverrides); memberlist tells a
// node that restarts quickly under its name to no one else as a join.

// OverrideChange is a change of one of a rule's overrides, or, with no
// Rule, a request of the node named Change for the receiver's overrides
// (AskOverrides).
type OverrideChange struct {
	Rule   string // the rule's name, at most MaxRuleBytes bytes
	Change []byte // the change as the rule's owner encodes it, at most MaxKeyBytes bytes
}

// AskOverrides asks the live member named node to send this node its
// overrides (see OverrideChange); false if node is not a live member.
func (c *Cluster) AskOverrides(node string) (bool, error) {
	return c.SendOverrides(node, []OverrideChange{{Change: []byte(c.name)}})
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

// SendOverrides sends changes to the live member named node, one message
// after another over TCP (never more than one stream at once to it), and
// returns the first error; false if node is not a live member.
func (c *Cluster) SendOverrides(node string, changes []OverrideChange) (bool, error) {
	c.mu.Lock()
	n, ok := c.alive[node]
	c.mu.Unlock()
	if !ok || node == c.name {
		return false, nil
	}
	for _, o := range changes {
		msg, err := AppendOverride(nil, o)
		if err != nil {
			return true, err
		}
		if err := c.ml.SendReliable(&n, msg); err != nil {
			c.sendErrors.Add(1)
			return true, fmt.Errorf("gossip: send overrides to %s: %w", node, err)
		}
		c.sent.Add(1)
		c.sentBytes.Add(uint64(len(msg)))
	}
	return true, nil
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
