package gossip

import (
	"net"
	"sync"
	"testing"
	"time"
)

// TestCloseUnderStreams: a node closes while connections keep coming:
// the stream watch hands them on (or closes them) until the transport
// underneath has stopped, so Close returns.
func TestCloseUnderStreams(t *testing.T) {
	for range 5 {
		c, err := New(Config{Bind: "127.0.0.1:0", Tune: fastTune}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		addr := c.Addr()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if tc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
						tc.Close()
					}
				}
			})
		}
		closed := make(chan error)
		go func() { closed <- c.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close still waiting after 10 s while connections came in")
		}
		close(stop)
		wg.Wait()
	}
}
