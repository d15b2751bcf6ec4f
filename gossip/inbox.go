package gossip

import "slices"

// dropReasons are the reasons Stats.Dropped counts by; the last catches
// any other.
var dropReasons = [...]string{"version", "type", "truncated", "too_large", "trailing", "overflow", "other"}

// inboxSize bounds the decoded messages waiting for the callbacks.
const inboxSize = 1024

// inbound is a decoded message waiting for dispatch: a report part if
// report is set, else a reset.
type inbound struct {
	report *Report
	reset  Reset
}

func (c *Cluster) drop(reason string) {
	i := slices.Index(dropReasons[:], reason)
	if i < 0 {
		i = len(dropReasons) - 1
	}
	c.dropped[i].Add(1)
}

// receive handles a user message from memberlist's goroutine: it decodes
// it (copying out of b, which memberlist may reuse) and queues it for
// dispatch, never blocking.
func (c *Cluster) receive(b []byte) {
	c.recv.Add(1)
	c.recvBytes.Add(uint64(len(b)))
	t, err := PeekType(b)
	if err != nil {
		c.drop(Reason(err))
		return
	}
	var in inbound
	switch t {
	case MsgReport:
		r, err := DecodeReport(b)
		if err != nil {
			c.drop(Reason(err))
			return
		}
		in.report = &r
	case MsgReset:
		if in.reset, err = DecodeReset(b); err != nil {
			c.drop(Reason(err))
			return
		}
	case MsgLeave:
		name, err := DecodeLeave(b)
		if err != nil {
			c.drop(Reason(err))
			return
		}
		c.noteLeave(name)
		return
	}
	select {
	case c.inbox <- in:
	default:
		c.drop("overflow")
	}
}

func (c *Cluster) dispatch() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case in := <-c.inbox:
			if in.report != nil {
				c.reportsRecv.Add(1)
				if c.onReport != nil {
					c.onReport(*in.report)
				}
			} else {
				c.resetsRecv.Add(1)
				if c.onReset != nil {
					c.onReset(in.reset.Rule, in.reset.Key)
				}
			}
		}
	}
}
