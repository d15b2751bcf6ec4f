package gossip

import (
	"fmt"
	"slices"
)

// dropReasons are the reasons Stats.Dropped counts by; the last catches
// any other. memberlist drops packets and streams without the cluster's
// label ("label"), that fail decryption ("decrypt", so sent without the
// key), that it cannot decode ("decode"), cut short ("truncated") or over
// its size limits ("too_large"), and streams that end before their first
// byte ("empty": port scans, and a member under load giving up); the
// stream limits drop streams that claim or send more than MaxStreamBytes
// ("stream_oversized"), arrive past MaxInboundStreams open
// ("stream_excess") or send slower than StreamReadTimeout allows
// ("stream_timeout"); this
// package drops messages it cannot decode (the reasons of Reason) and
// those that arrive faster than the callbacks take them ("overflow",
// memberlist's queue too).
var dropReasons = [...]string{"label", "decrypt", "decode", "empty", dropOversized, dropExcess, dropTimeout,
	"version", "type", "truncated", "too_large", "trailing", "overflow", "other"}

// inboxSize bounds the decoded messages waiting for the callbacks.
const inboxSize = 1024

// inbound is a decoded message waiting for dispatch: a report part if
// report is set, else a reset.
type inbound struct {
	report   *Report
	reset    Reset
	override *OverrideChange
}

// drop counts one packet, stream or message dropped for reason.
func (c *Cluster) drop(reason string) {
	i := slices.Index(dropReasons[:], reason)
	if i < 0 {
		i = len(dropReasons) - 1
	}
	c.dropped[i].Add(1)
}

// streamDropped counts a stream the stream limits dropped, and logs it,
// sampled by reason.
func (c *Cluster) streamDropped(e *streamDropped, addr string) {
	c.drop(e.reason)
	c.droplog.sampled(e.reason, fmt.Sprintf("[WARN] %v from=%s", e, addr))
}

// reject drops a message that failed to decode, and logs it, sampled
// with memberlist's lines of the reason.
func (c *Cluster) reject(err error) {
	reason := Reason(err)
	c.drop(reason)
	c.droplog.sampled(reason, "[WARN] gossip: dropped a message: "+err.Error())
}

// receive handles a user message from memberlist's goroutine: it decodes
// it (copying out of b, which memberlist may reuse) and queues it for
// dispatch, never blocking.
func (c *Cluster) receive(b []byte) {
	c.recv.Add(1)
	c.recvBytes.Add(uint64(len(b)))
	t, err := PeekType(b)
	if err != nil {
		c.reject(err)
		return
	}
	var in inbound
	switch t {
	case MsgReport, MsgReportBlocks:
		r, err := DecodeReport(b)
		if err != nil {
			c.reject(err)
			return
		}
		in.report = &r
	case MsgReset:
		if in.reset, err = DecodeReset(b); err != nil {
			c.reject(err)
			return
		}
	case MsgOverride:
		o, err := DecodeOverride(b)
		if err != nil {
			c.reject(err)
			return
		}
		in.override = &o
	case MsgLeave:
		name, err := DecodeLeave(b)
		if err != nil {
			c.reject(err)
			return
		}
		c.noteLeave(name)
		return
	}
	select {
	case c.inbox <- in:
	default:
		c.drop("overflow")
		c.droplog.sampled("overflow", fmt.Sprintf("[WARN] gossip: dropped a message: %d are waiting for the callbacks", inboxSize))
	}
}

func (c *Cluster) dispatch() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case in := <-c.inbox:
			switch {
			case in.report != nil:
				c.reportsRecv.Add(1)
				if c.onReport != nil {
					c.onReport(*in.report)
				}
			case in.override != nil:
				c.overridesRecv.Add(1)
				if c.onOverride != nil {
					c.onOverride(*in.override)
				}
			default:
				c.resetsRecv.Add(1)
				if c.onReset != nil {
					c.onReset(in.reset.Rule, in.reset.Key)
				}
			}
		}
	}
}
