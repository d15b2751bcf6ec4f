package gossip

import (
	"fmt"
	"log"
	"strings"
	"sync"
	"time"
)

// memberlist drops what fails its checks (a packet or stream without the
// cluster's label, one that fails decryption, a message it cannot decode)
// with nothing but a log line: it has no hook for them. So that each is
// counted, and junk sent to the gossip port does not write a line a
// packet, memberlist's logger (and its transport's) writes to a dropLog,
// which classifies each line (classifyLine), counts those that tell of a
// drop by reason, and passes the lines of a class through a sampler.
// Streams that end before their first byte are told apart
// (streamwatch.go); streams the stream limits drop are counted as they
// are dropped (streamcap.go), and memberlist's line of the read they
// failed is only sampled.

// logInterval is how often at most a line of one class is logged.
const logInterval = time.Second

// The log-only class: lines sampled but not counted, because they come
// with every stream (memberlist's debug line for each connection), or
// follow a drop already counted (its error reply failing, as the junk's
// sender has gone).
const classStream = "stream"

// lineClass is what classifyLine makes of a log line.
type lineClass struct {
	class string // a drop reason, classStream, or "" for a line passed as it is
	drop  bool   // the line tells of one packet or stream dropped
}

// dropLine is a message of memberlist's (v0.7.0) that tells of input it
// dropped, or that comes with such input; prefix is the message's start,
// after the level and "memberlist: ".
type dropLine struct {
	prefix string
	class  string // a drop reason, classStream, or "receive": by the error (receiveReason)
	drop   bool
}

// dropLines are the messages of memberlist v0.7.0's net.go and
// net_transport.go for input dropped, each with the reason it is counted
// under. Each drop writes one of them (and, for a stream, maybe a
// classStream line too), so each is counted once.
var dropLines = [...]dropLine{
	// packets: ingestPacket, handleCommand and its handlers, udpListen
	{"discarding packet with unacceptable label", "label", true},
	{"cannot decode label; packet has been truncated", "label", true},
	{"label header cannot be empty when present", "label", true},
	{"unexpected double packet label header", "label", true},
	{"Decrypt packet failed", "decrypt", true},
	{"UDP packet too short", "truncated", true},
	{"Got invalid checksum for UDP packet", "decode", true},
	{"missing message type byte", "decode", true},
	{"msg type (", "decode", true},     // msg type (%d) not supported
	{"Message type (", "decode", true}, // Message type (%d) not supported ... (packet handler)
	{"Compound request had", "decode", true},
	{"Failed to decompress payload", "decode", true},
	{"Failed to decode ", "decode", true}, // ping request, ack response, alive message, …; a stream's ping
	{"handler queue full, dropping message", "overflow", true},
	{"Got ping for unexpected node", "other", true},
	// streams: handleConn
	{"discarding stream with unacceptable label", "label", true},
	{"failed to receive and remove the stream label header", "label", true},
	{"unexpected double stream label header", "label", true},
	{"failed to receive: ", "receive", true},
	{"Failed to receive user message", "decode", true},
	{"Failed to read remote state", "receive", true},
	{"Received invalid msgType", "decode", true},
	{"Too many pending push/pull requests", "overflow", true},
	// with every stream, or after a stream's drop
	{"Stream connection", classStream, false},
	{"Failed to encode error response", classStream, false},
	{"Failed to send error", classStream, false},
	{"Remote node state size is", classStream, false},
}

// receiveReason is the reason of a stream memberlist failed to read, by
// its error.
func receiveReason(msg string) string {
	switch {
	case strings.Contains(msg, "decrypt"), strings.Contains(msg, "encrypt"):
		return "decrypt" // no key decrypts it, a bad encryption version, or not encrypted at all
	case strings.Contains(msg, "larger than limit"), strings.Contains(msg, "exceeds limit"):
		return "too_large"
	case strings.Contains(msg, "EOF"), strings.Contains(msg, "timeout"),
		strings.Contains(msg, "connection reset"), strings.Contains(msg, "closed"):
		return "truncated"
	default:
		return "decode"
	}
}

// logLevels are the level prefixes memberlist writes.
var logLevels = [...]string{"[ERR] ", "[WARN] ", "[DEBUG] ", "[INFO] ", "[ERROR] "}

// classifyLine classifies one of memberlist's log lines ("[ERR]
// memberlist: Decrypt packet failed: … from=…"): the drop reason it
// tells of, classStream, or "" for any other line.
func classifyLine(line string) lineClass {
	msg := line
	for _, l := range logLevels {
		if rest, ok := strings.CutPrefix(msg, l); ok {
			msg = rest
			break
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	if strings.Contains(msg, streamDroppedText) {
		// a read the stream limits failed: counted as they dropped it
		return lineClass{class: classStream}
	}
	for _, d := range dropLines {
		if strings.HasPrefix(msg, d.prefix) {
			if d.class == "receive" {
				return lineClass{class: receiveReason(msg[len(d.prefix):]), drop: true}
			}
			return lineClass{class: d.class, drop: d.drop}
		}
	}
	return lineClass{}
}

// dropLog is the writer of memberlist's logger. Each Write is one line
// (log.Logger writes a line at a time): a line that tells of a drop is
// counted, and the lines of a class are sampled; other lines pass as
// they are. Lines go to out, without their newline, which out adds.
type dropLog struct {
	out     *log.Logger
	count   func(reason string)
	sampler *sampler
	now     func() time.Time

	mu    sync.Mutex
	empty map[string]bool // senders of streams that ended before their first byte, until memberlist logs them
}

// maxEmpty bounds the empty streams a dropLog waits for memberlist's line
// of (memberlist logs each at once, after the read that found it over).
const maxEmpty = 256

func newDropLog(out *log.Logger, count func(reason string)) *dropLog {
	return &dropLog{out: out, count: count, sampler: newSampler(logInterval), now: time.Now, empty: make(map[string]bool)}
}

// emptyStream notes that the stream from addr ended before its first
// byte (see streamWatch).
func (d *dropLog) emptyStream(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.empty) >= maxEmpty {
		clear(d.empty)
	}
	d.empty[addr] = true
}

// emptyLine is memberlist's line for a stream without the label, which an
// empty stream has too.
const emptyLine = `memberlist: discarding stream with unacceptable label "": from=`

// wasEmpty reports whether line is memberlist's for a stream that
// emptyStream was told of, and forgets the stream.
func (d *dropLog) wasEmpty(line string) bool {
	_, addr, ok := strings.Cut(line, emptyLine)
	if !ok {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.empty[addr] {
		delete(d.empty, addr)
		return true
	}
	return false
}

func (d *dropLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	lc := classifyLine(line)
	if lc.class == "label" && d.wasEmpty(line) {
		lc.class = "empty"
	}
	if lc.drop {
		d.count(lc.class)
	}
	if lc.class == "" {
		d.out.Print(line)
		return len(p), nil
	}
	d.sampled(lc.class, line)
	return len(p), nil
}

// sampled writes a line of class if the sampler lets it through, with the
// number held back since the last.
func (d *dropLog) sampled(class, line string) {
	write, held := d.sampler.allow(class, d.now())
	if !write {
		return
	}
	if held > 0 {
		line = fmt.Sprintf("%s (and %d more %s lines since the last, not logged)", line, held, class)
	}
	d.out.Print(line)
}
