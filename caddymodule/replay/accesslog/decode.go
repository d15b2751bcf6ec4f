package accesslog

import (
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
}

// errNotAccessLog is the error of a line that is JSON but not a request
// of an access log (no request.method, no ts).
var errNotAccessLog = errors.New("not an access log entry")

// Decode reads one line of a Caddy JSON access log into e, reusing e's
// header map. It reads only the fields the replay needs and skips the
// others without building them, so a line costs about a copy of its
// strings (encoding/json builds every value: several times slower).
func (e *Entry) Decode(line []byte) error {
	d := decoder{b: line}
	*e = Entry{Header: e.Header, Hidden: e.Hidden[:0]}
	if e.Header == nil {
		e.Header = make(http.Header, 16)
	} else {
		clear(e.Header)
	}
	var ts float64
	var tsText string
	var haveTS bool
	var remoteIP, remotePort string
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
			return d.str(&e.Logger)
		case "request":
			return d.object(func(key []byte) error {
				switch string(key) {
				case "remote_ip":
					return d.str(&remoteIP)
				case "remote_port":
					return d.str(&remotePort)
				case "client_ip":
					return d.str(&e.Client)
				case "proto":
					return d.str(&e.Proto)
				case "method":
					return d.str(&e.Method)
				case "host":
					return d.str(&e.Host)
				case "uri":
					return d.str(&e.URI)
				case "headers":
					return d.object(e.header(&d))
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
	e.Remote = remoteIP
	if remotePort != "" {
		e.Remote = joinHostPort(remoteIP, remotePort)
	}
	return nil
}

// header reads one header of the headers object into e.Header, leaving
// out the values Caddy redacted.
func (e *Entry) header(d *decoder) func(key []byte) error {
	return func(key []byte) error {
		name := http.CanonicalHeaderKey(string(key))
		var vals []string
		err := d.array(func() error {
			var s string
			if err := d.str(&s); err != nil {
				return err
			}
			vals = append(vals, s)
			return nil
		})
		if err != nil {
			return err
		}
		if len(vals) == 1 && vals[0] == "REDACTED" && redactedByCaddy(name) {
			e.Hidden = append(e.Hidden, name)
			return nil
		}
		e.Header[name] = vals
		return nil
	}
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

// joinHostPort is net.JoinHostPort.
func joinHostPort(host, port string) string {
	for i := 0; i < len(host); i++ {
		if host[i] == ':' {
			return "[" + host + "]:" + port
		}
	}
	return host + ":" + port
}

// decoder reads JSON values from b, from i on.
type decoder struct {
	b []byte
	i int
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
	var buf [64]byte
	for {
		if d.ws() != '"' {
			return errSyntax
		}
		key, err := d.raw(buf[:0])
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
