package accesslog

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Entry is one request of a Caddy access log, as the replay rebuilds it.
// The fields are Caddy's (LoggableHTTPRequest and the access logger's).
type Entry struct {
	Start  time.Time     // when the request began: ts − duration
	End    time.Time     // ts, when it was logged
	Status int           // the status Caddy answered; 0 if not logged
	Logger string        // the access logger's name, "http.log.access.log0"
	Remote string        // remote_ip:remote_port, the peer
	Client string        // client_ip: the client as the rules saw it ("" if not logged)
	Proto  string        // "HTTP/1.1"
	Method string        // "GET"
	Host   string        // the Host header
	URI    string        // the request URI, "/path?query"
	Header http.Header   // the logged headers, those the log redacts left out
	Hidden []string      // the names of the headers the log redacted ("REDACTED")
	dur    time.Duration // duration
	reuse  *reuse        // what decoding the next line reuses
}

// reuse is what an Entry's lines share: strings of few values met again
// and again (header names, methods, protocols, hosts, loggers), made once,
// and a buffer of a key being unescaped.
type reuse struct {
	words map[string]string
	names map[string]string // a header's name as logged → canonical
	key   []byte
	text  []byte     // the line's client, URI and header values, unescaped, end to end
	spans []span     // where each header value lies in text
	hdrs  []headerAt // the line's headers, in spans
}

// headerAt is a header's name and where its values are in reuse.spans.
type headerAt struct {
	name     string
	from, to int
}

// span is where a string lies in reuse.text.
type span struct{ from, to int }

// span reads a string and appends it to u.text, where sp says it lies.
// The strings of a line are made at its end, all in one allocation
// (Entry.Decode): they live as long as one of them does.
func (d *decoder) span(sp *span, u *reuse) error {
	b, err := d.scratch()
	if err != nil {
		return err
	}
	sp.from = len(u.text)
	u.text = append(u.text, b...)
	sp.to = len(u.text)
	return nil
}

// maxWords bounds reuse.words: a log of many distinct hosts or header
// names has the strings past it made each time.
const maxWords = 4096

// name is the canonical form of the header name b, made once for all
// lines.
func (u *reuse) name(b []byte) string {
	if s, ok := u.names[string(b)]; ok { // no allocation: the conversion is only read
		return s
	}
	s := http.CanonicalHeaderKey(string(b))
	if len(u.names) < maxWords {
		u.names[string(b)] = s
	}
	return s
}

// word is b as a string, made once for all lines.
func (u *reuse) word(b []byte) string {
	if s, ok := u.words[string(b)]; ok { // no allocation: the conversion is only read
		return s
	}
	s := string(b)
	if len(u.words) < maxWords {
		u.words[s] = s
	}
	return s
}

// errNotAccessLog is the error of a line that is JSON but not a request
// of an access log (no request.method, no ts).
var errNotAccessLog = errors.New("not an access log entry")

// Decode reads one line of a Caddy JSON access log into e, reusing e's
// header map. It reads only the fields the replay needs and skips the
// others without building them, so a line costs about a copy of its
// strings (encoding/json builds every value: several times slower).
func (e *Entry) Decode(line []byte) error {
	if e.reuse == nil {
		e.reuse = &reuse{words: make(map[string]string), names: make(map[string]string), key: make([]byte, 0, 64)}
	}
	d := decoder{b: line, key: e.reuse.key[:0]}
	*e = Entry{Header: e.Header, Hidden: e.Hidden[:0], reuse: e.reuse}
	if e.Header == nil {
		e.Header = make(http.Header, 16)
	} else {
		clear(e.Header)
	}
	u := e.reuse
	u.text, u.spans, u.hdrs = u.text[:0], u.spans[:0], u.hdrs[:0]
	var client, uri span
	var remoteIP, remotePort []byte
	var ts float64
	var tsText string
	var haveTS bool
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "ts":
			haveTS = true
			return d.numberOrText(&ts, &tsText)
		case "duration":
			var secs float64
			var text string
			if err := d.numberOrText(&secs, &text); err != nil {
				return err
			}
			if text != "" {
				dur, err := time.ParseDuration(text)
				if err != nil {
					return err
				}
				e.dur = dur
				return nil
			}
			e.dur = time.Duration(secs * float64(time.Second))
			return nil
		case "status":
			var n float64
			if err := d.number(&n); err != nil {
				return err
			}
			e.Status = int(n)
			return nil
		case "logger":
			return d.word(&e.Logger, e.reuse)
		case "request":
			return d.object(func(key []byte) error {
				switch string(key) {
				case "remote_ip":
					return d.bytes(&remoteIP)
				case "remote_port":
					return d.bytes(&remotePort)
				case "client_ip":
					return d.span(&client, u)
				case "proto":
					return d.word(&e.Proto, e.reuse)
				case "method":
					return d.word(&e.Method, e.reuse)
				case "host":
					return d.word(&e.Host, e.reuse)
				case "uri":
					return d.span(&uri, u)
				case "headers":
					return d.object(func(key []byte) error { return e.header(&d, key) })
				}
				return d.skip()
			})
		}
		return d.skip()
	})
	if err != nil {
		return err
	}
	if d.ws() != 0 {
		return errSyntax // more after the object
	}
	text := string(u.text)
	e.Client, e.URI = text[client.from:client.to], text[uri.from:uri.to]
	if len(u.hdrs) > 0 {
		vals := make([]string, len(u.spans))
		for i, sp := range u.spans {
			vals[i] = text[sp.from:sp.to]
		}
		for _, h := range u.hdrs {
			e.Header[h.name] = vals[h.from:h.to:h.to] // capped: appending to one copies it
		}
	}
	if !haveTS || e.Method == "" || e.URI == "" {
		return errNotAccessLog
	}
	if tsText != "" {
		t, err := time.Parse(time.RFC3339Nano, tsText)
		if err != nil {
			return err
		}
		e.End = t
	} else {
		// to the µs: a float of Unix seconds holds no more (Caddy's ts
		// is zap's epoch float)
		sec, frac := math.Modf(ts)
		e.End = time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
	}
	e.Start = e.End.Add(-e.dur)
	e.Remote = joinHostPort(remoteIP, remotePort)
	return nil
}

// header reads the values of the header named key into the line's text,
// leaving out the values Caddy redacted; Decode puts them in e.Header once
// the line's strings are made.
func (e *Entry) header(d *decoder, key []byte) error {
	name := e.reuse.name(key)
	u := e.reuse
	from := len(u.spans)
	err := d.array(func() error {
		var sp span
		if err := d.span(&sp, u); err != nil {
			return err
		}
		u.spans = append(u.spans, sp)
		return nil
	})
	if err != nil {
		return err
	}
	if sp := u.spans[from:]; len(sp) == 1 && string(u.text[sp[0].from:sp[0].to]) == "REDACTED" && redactedByCaddy(name) {
		e.Hidden = append(e.Hidden, name)
		u.text, u.spans = u.text[:sp[0].from], u.spans[:from]
		return nil
	}
	u.hdrs = append(u.hdrs, headerAt{name: name, from: from, to: len(u.spans)})
	return nil
}

// redactedByCaddy is true for the headers Caddy's access log writes as
// ["REDACTED"] unless the server has log_credentials.
func redactedByCaddy(name string) bool {
	switch name {
	case "Authorization", "Cookie", "Proxy-Authorization":
		return true
	}
	return false
}

// joinHostPort is net.JoinHostPort, one string made; host alone without
// a port, "" without a host.
func joinHostPort(host, port []byte) string {
	if len(port) == 0 {
		return string(host)
	}
	if bytes.IndexByte(host, ':') >= 0 {
		return "[" + string(host) + "]:" + string(port)
	}
	b := make([]byte, 0, len(host)+1+len(port))
	return string(append(append(append(b, host...), ':'), port...))
}

// decoder reads JSON values from b, from i on.
type decoder struct {
	b   []byte
	i   int
	key []byte // the buffer of an object's key with escapes
}

var errSyntax = errors.New("invalid JSON")

// ws skips white space and returns the next byte (0 at the end).
func (d *decoder) ws() byte {
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c
		}
	}
	return 0
}

// object reads an object, calling member for each key with d at its value;
// member must read the value.
func (d *decoder) object(member func(key []byte) error) error {
	if d.ws() != '{' {
		return errSyntax
	}
	d.i++
	if d.ws() == '}' {
		d.i++
		return nil
	}
	for {
		if d.ws() != '"' {
			return errSyntax
		}
		key, err := d.raw(d.key[:0])
		if err != nil {
			return err
		}
		if d.ws() != ':' {
			return errSyntax
		}
		d.i++
		if err := member(key); err != nil {
			return err
		}
		switch d.ws() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// array reads an array, calling elem with d at each element.
func (d *decoder) array(elem func() error) error {
	if d.ws() != '[' {
		return errSyntax
	}
	d.i++
	if d.ws() == ']' {
		d.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch d.ws() {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// str reads a string into s.
func (d *decoder) str(s *string) error {
	if d.ws() != '"' {
		return errSyntax
	}
	var buf [128]byte
	b, err := d.raw(buf[:0])
	if err != nil {
		return err
	}
	*s = string(b)
	return nil
}

// bytes reads a string into b: a slice of d.b, or of a new array if it
// has escapes.
func (d *decoder) bytes(b *[]byte) error {
	if d.ws() != '"' {
		return errSyntax
	}
	v, err := d.raw(nil)
	*b = v
	return err
}

// word reads a string into s, made once for all lines (reuse.word).
func (d *decoder) word(s *string, u *reuse) error {
	b, err := d.scratch()
	if err != nil {
		return err
	}
	*s = u.word(b)
	return nil
}

// scratch reads a string, unescaped in d.key if it has escapes: the
// bytes returned hold until the next string is read.
func (d *decoder) scratch() ([]byte, error) {
	if d.ws() != '"' {
		return nil, errSyntax
	}
	return d.raw(d.key[:0])
}

// raw reads a string (d at its quote) and returns its unescaped bytes:
// a slice of d.b when it has no escape, else appended to buf.
func (d *decoder) raw(buf []byte) ([]byte, error) {
	d.i++
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], nil
		case c == '\\':
			return d.escaped(append(buf, d.b[start:d.i]...))
		case c < 0x20:
			return nil, errSyntax
		default:
			d.i++
		}
	}
	return nil, errSyntax
}

// escaped reads the rest of a string that has escapes, from d.i at a
// backslash, appending to buf.
func (d *decoder) escaped(buf []byte) ([]byte, error) {
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return buf, nil
		case c < 0x20:
			return nil, errSyntax
		case c != '\\':
			buf = append(buf, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, errSyntax
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, errSyntax
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					d.i += 2
					if r2, ok = d.hex4(); !ok {
						return nil, errSyntax
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, errSyntax
		}
	}
	return nil, errSyntax
}

// hex4 reads the four hex digits of a \u escape.
func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// number reads a number into f.
func (d *decoder) number(f *float64) error {
	if c := d.ws(); c != '-' && (c < '0' || c > '9') {
		return errSyntax
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	if start == d.i {
		return errSyntax
	}
	v, err := strconv.ParseFloat(string(d.b[start:d.i]), 64) // no allocation: the conversion is only read
	if err != nil {
		return errSyntax
	}
	*f = v
	return nil
}

// numberOrText reads a number into f or a string into s (a time or a
// duration logged as text).
func (d *decoder) numberOrText(f *float64, s *string) error {
	if d.ws() == '"' {
		return d.str(s)
	}
	return d.number(f)
}

// skip skips one value of any kind.
func (d *decoder) skip() error {
	switch d.ws() {
	case '"':
		_, err := d.raw(nil)
		return err
	case '{':
		return d.object(func([]byte) error { return d.skip() })
	case '[':
		return d.array(d.skip)
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		var f float64
		return d.number(&f)
	}
}

// literal reads the word w.
func (d *decoder) literal(w string) error {
	if len(d.b)-d.i < len(w) || string(d.b[d.i:d.i+len(w)]) != w {
		return errSyntax
	}
	d.i += len(w)
	return nil
}
