package accesslog

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// line is an access-log line as Caddy writes it, at ts (seconds) with
// duration (seconds), from client ip, for uri.
func line(ts, duration float64, ip, uri string, status int) string {
	b, _ := json.Marshal(map[string]any{
		"level": "info", "ts": ts, "logger": "http.log.access.log0", "msg": "handled request",
		"request": map[string]any{
			"remote_ip": "127.0.0.1", "remote_port": "40000", "client_ip": ip, "proto": "HTTP/1.1",
			"method": "GET", "host": "example.com", "uri": uri,
			"headers": map[string][]string{"User-Agent": {"curl/8"}, "Authorization": {"REDACTED"}, "Accept": {"*/*"},
				"Accept-Encoding": {"gzip, br"}, "X-Forwarded-For": {ip}, "Referer": {"https://example.com/"}},
		},
		"bytes_read": 0, "user_id": "", "duration": duration, "size": 2, "status": status,
		"resp_headers": map[string][]string{"Server": {"Caddy"}, "Content-Type": {"application/json"}, "Ratelimit": {`"api";r=9;t=60`}},
	})
	return string(b)
}

func TestDecode(t *testing.T) {
	var e Entry
	if err := e.Decode([]byte(line(1700000000.5, 0.25, "203.0.113.7", "/a?b=c", 429))); err != nil {
		t.Fatal(err)
	}
	want := Entry{
		Start: time.Unix(1700000000, 250e6), End: time.Unix(1700000000, 500e6), Status: 429,
		Logger: "http.log.access.log0", Remote: "127.0.0.1:40000", Client: "203.0.113.7",
		Proto: "HTTP/1.1", Method: "GET", Host: "example.com", URI: "/a?b=c",
		Header: http.Header{"User-Agent": {"curl/8"}, "Accept": {"*/*"}, "Accept-Encoding": {"gzip, br"}, "X-Forwarded-For": {"203.0.113.7"},
			"Referer": {"https://example.com/"}}, Hidden: []string{"Authorization"}, dur: 250 * time.Millisecond,
	}
	if !e.Start.Equal(want.Start) || !e.End.Equal(want.End) {
		t.Fatalf("start %v end %v, want %v %v", e.Start, e.End, want.Start, want.End)
	}
	e.Start, e.End, e.reuse = want.Start, want.End, nil
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
}

// TestDecodeManyHeaders: a line of 40 headers, some of several values,
// one redacted among them, decodes to each its own values, and the next
// line's to its own.
func TestDecodeManyHeaders(t *testing.T) {
	var e Entry
	for _, n := range []int{40, 3} {
		want := http.Header{}
		headers := map[string][]string{"Cookie": {"REDACTED"}}
		for i := range n {
			name := fmt.Sprintf("X-H%d", i)
			vals := []string{fmt.Sprintf("v%d", i), fmt.Sprintf("w%d\t", i)}[:1+i%2]
			headers[name], want[name] = vals, vals
		}
		b, _ := json.Marshal(map[string]any{"ts": 1, "request": map[string]any{"method": "GET", "uri": "/u", "client_ip": "192.0.2.1", "headers": headers}})
		if err := e.Decode(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Header, want) || e.URI != "/u" || e.Client != "192.0.2.1" || fmt.Sprint(e.Hidden) != "[Cookie]" {
			t.Fatalf("%d headers: got %v %q %q %v\nwant %v", n, e.Header, e.URI, e.Client, e.Hidden, want)
		}
	}
}

func TestDecodeForms(t *testing.T) {
	for i, tc := range []struct {
		line   string
		ok     bool
		uri    string
		start  time.Time
		header http.Header
	}{
		// escapes, a surrogate pair, an IPv6 peer
		{line: `{"ts":10,"duration":1,"request":{"remote_ip":"::1","remote_port":"5","method":"GET","uri":"/\u00e9\"\\\/\ud83d\ude00","headers":{"X-K":["a\tb"]}}}`,
			ok: true, uri: "/é\"\\/😀", start: time.Unix(9, 0), header: http.Header{"X-K": {"a\tb"}}},
		// ts as RFC 3339 text, duration as a Go duration (time_format, duration_format)
		{line: `{"ts":"2026-01-02T03:04:05.5Z","duration":"500ms","request":{"method":"POST","uri":"/x"}}`,
			ok: true, uri: "/x", start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), header: http.Header{}},
		// a header Caddy does not redact keeps REDACTED as its value
		{line: `{"ts":1,"request":{"method":"GET","uri":"/","headers":{"X-Note":["REDACTED"]}}}`,
			ok: true, uri: "/", start: time.Unix(1, 0), header: http.Header{"X-Note": {"REDACTED"}}},
		{line: `{"level":"info","ts":1,"msg":"using config from file"}`},          // Caddy's own line
		{line: `{"ts":1,"request":{"method":"GET"}}`},                             // no uri
		{line: `{"request":{"method":"GET","uri":"/"}}`},                          // no ts
		{line: `{"ts":1,"request":{"method":"GET","uri":"/"}} trailing`},          // more after it
		{line: `{"ts":1,"request":{"method":"GET","uri":"/"`},                     // cut short
		{line: `{"ts":+1,"request":{"method":"GET","uri":"/"}}`},                  // not a JSON number
		{line: `{"ts":1,"request":{"method":"GET","uri":"/\x01"}}`},               // a control character
		{line: `{"ts":1,"request":{"method":"GET","uri":"/","headers":{"A":1}}}`}, // a header not a list
		{line: `plain text`},
		{line: `[1,2]`},
	} {
		var e Entry
		err := e.Decode([]byte(tc.line))
		if (err == nil) != tc.ok {
			t.Fatalf("Test %d: error %v, want ok=%t", i, err, tc.ok)
		}
		if !tc.ok {
			continue
		}
		if e.URI != tc.uri || !e.Start.Equal(tc.start) || !reflect.DeepEqual(e.Header, tc.header) {
			t.Fatalf("Test %d: uri %q start %v header %v, want %q %v %v", i, e.URI, e.Start, e.Header, tc.uri, tc.start, tc.header)
		}
	}
}

// FuzzDecode: Decode never panics, and what it reads of valid JSON is what
// encoding/json reads.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(line(1700000000.5, 0.25, "203.0.113.7", "/a?b=c", 200)))
	f.Add([]byte(`{"ts":1,"request":{"method":"GET","uri":"/\u00e9","headers":{"A":["\ud83d\ude00"]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Entry
		err := e.Decode(b)
		if err != nil || !json.Valid(b) || !utf8.Valid(b) {
			return
		}
		var v struct {
			Request struct {
				Method, URI, Host string
				Headers           map[string][]string
			}
		}
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if v.Request.Method != e.Method || v.Request.URI != e.URI || v.Request.Host != e.Host {
			t.Fatalf("decoded %q %q %q, encoding/json %q %q %q", e.Method, e.URI, e.Host, v.Request.Method, v.Request.URI, v.Request.Host)
		}
	})
}

// writeLog writes lines to a file in dir, gzipped if the name ends in .gz.
func writeLog(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	var b bytes.Buffer
	text := strings.Join(lines, "\n") + "\n"
	if strings.HasSuffix(name, ".gz") {
		z := gzip.NewWriter(&b)
		z.Write([]byte(text))
		z.Close()
	} else {
		b.WriteString(text)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readAll reads every request of r, by URI.
func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	defer r.Close()
	var uris []string
	var e Entry
	for {
		ok, err := r.Next(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return uris
		}
		uris = append(uris, e.URI)
	}
}

func TestReaderSkipsJunk(t *testing.T) {
	dir := t.TempDir()
	p := writeLog(t, dir, "access.log",
		`{"level":"info","ts":1,"logger":"tls","msg":"cleaning storage unit"}`,
		line(10, 0, "192.0.2.1", "/1", 200),
		"not json at all",
		"",
		`{"ts":11,"request":{"method":"GET","uri":"/cut`,
		line(12, 0, "192.0.2.1", "/2", 200),
		"\x00\x01\x02",
		strings.Repeat("x", MaxLineBytes+10),
		line(13, 0, "192.0.2.1", "/3", 200)+"\r",
	)
	r, err := Open([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r)
	if want := []string{"/1", "/2", "/3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if r.Lines != 8 || r.Skipped != 5 {
		t.Fatalf("lines %d skipped %d, want 8 and 5 (empty lines are not lines)", r.Lines, r.Skipped)
	}
}

func TestReaderFilesOldestFirst(t *testing.T) {
	dir := t.TempDir()
	newest := writeLog(t, dir, "access.log", line(300, 0, "192.0.2.1", "/c", 200))
	oldest := writeLog(t, dir, "access-1.log.gz", line(100, 0, "192.0.2.1", "/a1", 200), line(101, 0, "192.0.2.1", "/a2", 200))
	middle := writeLog(t, dir, "access-2.log.gz", line(200, 0, "192.0.2.1", "/b", 200))
	// a gzip file cut short, as one rotated while written: its whole lines
	full, _ := os.ReadFile(middle)
	cut := filepath.Join(dir, "access-3.log.gz")
	os.WriteFile(cut, append([]byte(nil), full[:len(full)-8]...), 0o644) // no gzip trailer
	r, err := Open([]string{newest, middle, oldest})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, r), []string{"/a1", "/a2", "/b", "/c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	r, err = Open([]string{cut})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, r), []string{"/b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("cut file: read %v, want %v", got, want)
	}
	if _, err := Open([]string{filepath.Join(dir, "missing.log")}); err == nil {
		t.Fatal("a missing file opened")
	}
}

func TestReaderFromTo(t *testing.T) {
	dir := t.TempDir()
	// starts: 99.5, 100, 104, 105 (ts − duration)
	p := writeLog(t, dir, "access.log",
		line(100, 0.5, "192.0.2.1", "/early", 200),
		line(101, 1, "192.0.2.1", "/from", 200),
		line(106, 2, "192.0.2.1", "/last", 200),
		line(105, 0, "192.0.2.1", "/to", 200),
	)
	r, err := Open([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	r.From, r.To = time.Unix(100, 0), time.Unix(105, 0)
	if got, want := readAll(t, r), []string{"/from", "/last"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if r.Outside != 2 || r.Lines != 4 {
		t.Fatalf("outside %d of %d lines, want 2 of 4", r.Outside, r.Lines)
	}
}

// FuzzDecodeReused: an Entry decoding line after line gives each line
// what a fresh Entry gives it: nothing of a line is left in the next.
func FuzzDecodeReused(f *testing.F) {
	f.Add([]byte(line(1700000000.5, 0.25, "203.0.113.7", "/a?b=c", 429)))
	f.Add([]byte(`{"ts":10,"duration":1,"request":{"remote_ip":"::1","remote_port":"5","method":"GET","uri":"/\u00e9\"\\\/\ud83d\ude00","headers":{"X-K":["a\tb"],"Cookie":["REDACTED"]}}}`))
	f.Add([]byte(`{"ts":"2026-01-02T03:04:05.5Z","duration":"500ms","request":{"method":"POST","uri":"/x","headers":{"A":["1","2"],"b":[]}}}`))
	var reused Entry
	reused.Decode([]byte(line(1, 0, "192.0.2.1", "/first", 200))) // a line before each
	f.Fuzz(func(t *testing.T, b []byte) {
		var fresh Entry
		errFresh := fresh.Decode(b)
		errReused := reused.Decode(b)
		if (errFresh == nil) != (errReused == nil) {
			t.Fatalf("fresh: %v, reused: %v", errFresh, errReused)
		}
		if errFresh != nil {
			return
		}
		keep := reused.reuse
		defer func() { reused.reuse = keep }()
		fresh.reuse, reused.reuse = nil, nil
		if len(fresh.Hidden) == 0 && len(reused.Hidden) == 0 {
			fresh.Hidden, reused.Hidden = nil, nil // a reused list is emptied, not dropped
		}
		if !reflect.DeepEqual(fresh, reused) {
			t.Fatalf("fresh %+v\nreused %+v", fresh, reused)
		}
	})
}
