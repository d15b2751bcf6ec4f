package clusternode

import (
	"errors"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// nodes holds the cluster node of each bind address, process-wide, in
// a caddy.UsagePool keyed by the address: a reload provisions its config
// while the running one still serves, and both must use the same node,
// which cannot bind twice. The pool's value is the address's slot, whose
// node changes when a config with other cluster settings acquires it: the
// running node stops first (the running config then goes on without
// gossip until it stops). The last release of the address stops its node.
var nodes = caddy.NewUsagePool()

// bindSlot is the node that holds a bind address.
type bindSlot struct {
	mu   sync.Mutex
	node *Node // nil until started
}

// Destruct stops the address's node, when the last config using it is
// gone.
func (b *bindSlot) Destruct() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != nil {
		b.node.close()
	}
	return nil
}

// errNoNode is what Existing's constructor returns: it looks up, and
// never starts a node.
var errNoNode = errors.New("no cluster node runs on this address")

// Existing returns the running node of s, with one more use of its
// address, if its settings are s; else nil. It binds nothing, so
// Provision (and caddy validate) may call it.
func Existing(s Settings) *Node {
	v, _, err := nodes.LoadOrNew(s.Gossip.Bind, func() (caddy.Destructor, error) { return nil, errNoNode })
	if err != nil {
		return nil
	}
	slot := v.(*bindSlot)
	slot.mu.Lock()
	n := slot.node
	slot.mu.Unlock()
	if n == nil || n.print != s.Print {
		_, _ = nodes.Delete(s.Gossip.Bind)
		return nil
	}
	return n
}

// Acquire returns the node for s, with one more use of its address: the
// running one if its settings are s, else a new one, which first stops a
// node of other settings on the same address.
func Acquire(s Settings, logger *zap.Logger, reset func(rule, key string)) (*Node, error) {
	v, _, _ := nodes.LoadOrNew(s.Gossip.Bind, func() (caddy.Destructor, error) { return new(bindSlot), nil })
	slot := v.(*bindSlot)
	n, err := slot.start(s, logger, reset)
	if err != nil {
		_, _ = nodes.Delete(s.Gossip.Bind)
		return nil, err
	}
	return n, nil
}

// start returns the slot's node if its settings are s, else stops it and
// starts a node of s.
func (b *bindSlot) start(s Settings, logger *zap.Logger, reset func(rule, key string)) (*Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != nil && b.node.print == s.Print {
		return b.node, nil
	}
	if b.node != nil {
		b.node.close()
		b.node = nil
	}
	n, err := start(s, logger, reset)
	if err != nil {
		return nil, err
	}
	b.node = n
	return n, nil
}

// Release drops one use of n's address, and stops its node with the last.
func Release(n *Node) { _, _ = nodes.Delete(n.bind) }
