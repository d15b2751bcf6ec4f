package gossip

import (
	"io"
	"net"
	"sync"

	"github.com/hashicorp/memberlist"
)

// memberlist logs a stream that ends before its first byte as it logs a
// stream of junk, one without the label. Such streams are not junk
// alone: a port scan makes them, and so does a member under load, whose
// TCP ping (memberlist's fallback when UDP pings go unanswered) gives up
// when its deadline has passed by the time it is connected. So that they
// are counted apart ("empty"), streamWatch hands memberlist every stream
// in a watchedConn, which tells the dropLog the sender's address when the
// first read finds the stream over; the dropLog then counts memberlist's
// line for that address as "empty".

// streamWatch wraps the transport: its StreamCh gives the wrapped
// transport's streams, each in a watchedConn.
type streamWatch struct {
	memberlist.NodeAwareTransport

	streams  chan net.Conn
	onEmpty  func(addr string)
	stopping chan struct{} // closed as Shutdown starts
	done     chan struct{} // closed once the wrapped transport has stopped
	stopOnce sync.Once
	doneOnce sync.Once
}

func newStreamWatch(inner memberlist.NodeAwareTransport, onEmpty func(addr string)) *streamWatch {
	w := &streamWatch{
		NodeAwareTransport: inner,
		streams:            make(chan net.Conn),
		onEmpty:            onEmpty,
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
			case w.streams <- &watchedConn{Conn: c, onEmpty: w.onEmpty}:
			case <-w.stopping:
				_ = c.Close()
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

// watchedConn is a stream that calls onEmpty with the sender's address if
// its first read finds it over. memberlist reads a stream from one
// goroutine.
type watchedConn struct {
	net.Conn
	onEmpty func(addr string)
	read    bool
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.read {
		c.read = true
		if n == 0 && err == io.EOF {
			c.onEmpty(c.RemoteAddr().String())
		}
	}
	return n, err
}

var _ memberlist.NodeAwareTransport = (*streamWatch)(nil)
