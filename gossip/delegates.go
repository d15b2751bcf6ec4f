package gossip

import (
	"time"

	"github.com/hashicorp/memberlist"
)

const (
	maxGone    = 256         // departed members remembered for Members
	leftMemory = time.Minute // how long a leave message marks its sender as left
)

// noteLeave records a leave message from name, which may come before or
// after memberlist reports the node gone.
func (c *Cluster) noteLeave(name string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.gone[name]; ok {
		m.State = StateLeft
		c.gone[name] = m
		return
	}
	for n, t := range c.left {
		if now.Sub(t) > leftMemory {
			delete(c.left, n)
		}
	}
	if len(c.left) < maxGone {
		c.left[name] = now
	}
}

// delegate receives memberlist's user messages.
type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(int) []byte                 { return nil }
func (d delegate) NotifyMsg(b []byte)                  { d.c.receive(b) }
func (d delegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d delegate) LocalState(bool) []byte              { return nil }
func (d delegate) MergeRemoteState(buf []byte, _ bool) {}

// events follows members coming and going. memberlist calls it with its
// node lock held: it only updates maps.
type events struct{ c *Cluster }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.c.mu.Lock()
	delete(e.c.gone, n.Name)
	e.c.alive[n.Name] = *n
	e.c.mu.Unlock()
	if f := e.c.onJoin; f != nil && n.Name != e.c.name {
		go f(n.Name) // not under memberlist's lock
	}
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	e.c.mu.Lock()
	e.c.alive[n.Name] = *n
	e.c.mu.Unlock()
}

func (e events) NotifyLeave(n *memberlist.Node) {
	c := e.c
	now := time.Now()
	m := Member{Name: n.Name, Addr: n.Address(), State: StateDead, Since: now}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.alive, n.Name)
	if t, ok := c.left[n.Name]; ok {
		delete(c.left, n.Name)
		if now.Sub(t) <= leftMemory {
			m.State = StateLeft
		}
	}
	if _, ok := c.gone[n.Name]; !ok && len(c.gone) >= maxGone {
		var oldest string
		for name, g := range c.gone {
			if oldest == "" || g.Since.Before(c.gone[oldest].Since) {
				oldest = name
			}
		}
		delete(c.gone, oldest)
	}
	c.gone[n.Name] = m
}
