// Package accesslog reads Caddy JSON access logs (plain or gzip, one or
// many files) into the requests they record, for `caddy rate-limit replay`
// (package replay). It does not import Caddy.
package accesslog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// MaxLineBytes bounds a log line: a longer one is skipped (counted), not
// held whole.
const MaxLineBytes = 1 << 20

// Reader reads the requests of Caddy JSON access logs, plain or gzip, one
// file after another. Lines that are not access-log JSON (Caddy's other
// log lines, junk, a line cut short) are counted in Skipped and passed
// over, never an error; only a file that cannot be read is.
type Reader struct {
	// From and To, if set, bound the requests read by their start
	// (ts − duration): From ≤ start < To. Default: unbounded.
	From, To time.Time

	Lines   int64 // lines read, skipped ones included
	Skipped int64 // lines that are not access-log requests
	Outside int64 // requests outside From..To
	Bytes   int64 // bytes read from the files (compressed, for gzip)

	paths []string // files not opened yet
	done  int64    // bytes of the files read to their end
	file  *os.File
	count *countingReader
	buf   *bufio.Reader
	long  []byte // a line longer than buf, gathered
}

// Open returns a Reader of the files at paths, in the order of their
// first request's time (rotated logs are read oldest first whatever the
// order given). A file that cannot be opened or read is an error now.
func Open(paths []string) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("no log file")
	}
	firsts := make(map[string]time.Time, len(paths))
	for _, p := range paths {
		t, err := firstStart(p)
		if err != nil {
			return nil, err
		}
		firsts[p] = t
	}
	sorted := slices.Clone(paths)
	slices.SortStableFunc(sorted, func(a, b string) int { return firsts[a].Compare(firsts[b]) })
	return &Reader{paths: sorted}, nil
}

// firstStart is the start of the first request in the file at path; zero
// if it has none.
func firstStart(path string) (time.Time, error) {
	r := &Reader{paths: []string{path}}
	defer r.Close()
	var e Entry
	ok, err := r.Next(&e)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return e.Start, nil
}

// Next reads the next request into e. It returns false at the end of the
// last file.
func (r *Reader) Next(e *Entry) (bool, error) {
	for {
		line, err := r.line()
		if err != nil {
			return false, err
		}
		if line == nil {
			return false, nil
		}
		r.Lines++
		if err := e.Decode(line); err != nil {
			r.Skipped++
			continue
		}
		if !r.From.IsZero() && e.Start.Before(r.From) || !r.To.IsZero() && !e.Start.Before(r.To) {
			r.Outside++
			continue
		}
		return true, nil
	}
}

// line is the next non-empty line, without its newline; nil at the end of
// the last file. A line over MaxLineBytes is returned as a junk line.
func (r *Reader) line() ([]byte, error) {
	for {
		if r.buf == nil {
			if len(r.paths) == 0 {
				return nil, nil
			}
			if err := r.open(r.paths[0]); err != nil {
				return nil, err
			}
			r.paths = r.paths[1:]
		}
		line, err := r.buf.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.longLine(line)
		}
		r.Bytes = r.done + r.count.n
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF // a gzip file cut short (rotated while written): its lines so far
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s: %v", r.file.Name(), err)
		}
		if errors.Is(err, io.EOF) {
			r.closeFile()
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			return line, nil
		}
	}
}

// longLine gathers a line longer than the buffer; past MaxLineBytes the
// rest is read and dropped, and the line returned is not JSON.
func (r *Reader) longLine(first []byte) ([]byte, error) {
	r.long = append(r.long[:0], first...)
	for {
		more, err := r.buf.ReadSlice('\n')
		if len(r.long) <= MaxLineBytes {
			r.long = append(r.long, more...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > MaxLineBytes {
				return []byte("line too long"), err
			}
			return r.long, err
		}
	}
}

// open opens path, through gzip if it starts with gzip's magic bytes.
func (r *Reader) open(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	r.file = f
	r.count = &countingReader{r: f}
	br := bufio.NewReaderSize(r.count, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return fmt.Errorf("reading %s: %v", path, err)
		}
		br = bufio.NewReaderSize(z, 64<<10)
	}
	r.buf = br
	return nil
}

// closeFile closes the file being read; the next line opens the next.
func (r *Reader) closeFile() {
	if r.file != nil {
		r.file.Close()
		r.done += r.count.n
	}
	r.file, r.buf = nil, nil
}

// Close closes the file being read.
func (r *Reader) Close() error {
	r.closeFile()
	r.paths = nil
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
