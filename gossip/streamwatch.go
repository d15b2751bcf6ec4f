package gossip

import (
	"fmt"
	"net"
	"sync"

	"github.com/hashicorp/memberlist"
)

// streamWatch hands memberlist every stream it receives in an
// inboundConn (streamcap.go), which bounds what the stream may make
// memberlist read, and refuses a stream past limits.maxStreams at once.
// It also tells streams that end before their first byte apart:
// memberlist logs such a stream as it logs a stream of junk, one without
// the label. Such streams are not junk alone: a port scan makes them, and
// so does a member under load, whose TCP ping (memberlist's fallback when
// UDP pings go unanswered) gives up when its deadline has passed by the
// time it is connected. So that they are counted apart ("empty"), the
// inboundConn tells the dropLog the sender's address when the first read
// finds the stream over; the dropLog then counts memberlist's line for
// that address as "empty".

// streamWatch wraps the transport: its StreamCh gives the wrapped
// transport's streams, each in an inboundConn, while fewer than
// limits.maxStreams are open.
type streamWatch struct {
	memberlist.NodeAwareTransport

	streams  chan net.Conn
	limits   streamLimits
	hooks    streamHooks
	open     chan struct{} // a token for each stream open
	stopping chan struct{} // closed as Shutdown starts
	done     chan struct{} // closed once the wrapped transport has stopped
	stopOnce sync.Once
	doneOnce sync.Once
}

func newStreamWatch(inner memberlist.NodeAwareTransport, limits streamLimits, hooks streamHooks) *streamWatch {
	w := &streamWatch{
		NodeAwareTransport: inner,
		streams:            make(chan net.Conn),
		limits:             limits,
		hooks:              hooks,
		open:               make(chan struct{}, limits.maxStreams),
		stopping:           make(chan struct{}),
		done:               make(chan struct{}),
	}
	go w.forward()
	return w
}

// forward passes the wrapped transport's streams on until it has
// stopped. Its listener blocks until a stream is taken, and the wrapped
// transport's Shutdown waits for its listener: so while Shutdown runs,
// forward still takes streams, and closes those memberlist does not take.
func (w *streamWatch) forward() {
	in := w.NodeAwareTransport.StreamCh()
	for {
		select {
		case <-w.done:
			return
		case c := <-in:
			select {
			case w.open <- struct{}{}:
			default:
				w.hooks.dropped(&streamDropped{reason: dropExcess, detail: fmt.Sprintf("%d streams open", w.limits.maxStreams)}, c.RemoteAddr().String())
				_ = c.Close()
				continue
			}
			ic := newInboundConn(c, w.limits, w.hooks, func() { <-w.open })
			select {
			case w.streams <- ic:
			case <-w.stopping:
				_ = ic.Close()
			}
		}
	}
}

// StreamCh implements memberlist.Transport.
func (w *streamWatch) StreamCh() <-chan net.Conn { return w.streams }

// Shutdown implements memberlist.Transport.
func (w *streamWatch) Shutdown() error {
	w.stopOnce.Do(func() { close(w.stopping) })
	err := w.NodeAwareTransport.Shutdown()
	w.doneOnce.Do(func() { close(w.done) })
	return err
}

var _ memberlist.NodeAwareTransport = (*streamWatch)(nil)
