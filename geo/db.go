package geo

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"sync"

	"github.com/oschwald/maxminddb-golang/v2"
)

// DB is an open MaxMind-format database (GeoLite2 or GeoIP2 Country or
// City, DB-IP Country or City, or any database whose records hold
// country.iso_code), from which Country reads an address's country.
//
// Country is safe for concurrent use by any number of goroutines and
// allocates nothing. Close must wait until every Country call has
// returned. The database is memory-mapped and verified when opened, so it
// is meant to be opened once per process and shared (see the package
// documentation).
type DB struct {
	r      *maxminddb.Reader
	v4only bool // the database holds IPv4 networks only
	cache  codeCache
}

// isoCodePath is the path to a record's country code. A package variable,
// so that passing it to DecodePath allocates no slice.
var isoCodePath = []any{"country", "iso_code"}

// scratch holds the strings that Country decodes into: a local variable
// would escape to the heap through DecodePath, one allocation per lookup.
var scratch = sync.Pool{New: func() any { return new(string) }}

// probeRecords is how many records Open reads, at most, looking for one with
// a country code.
const probeRecords = 256

// Open opens and verifies the database at path. The error names the path
// and says what is wrong: the file is missing or unreadable, is not a
// MaxMind database or is corrupt, or holds no country data (an ASN or ISP
// database, say). Open reads the whole file once to verify it, as MaxMind's
// verifier does, so a corrupt database fails here, at config load, and
// never on a request; that takes up to a second or two for a City
// database.
func Open(path string) (*DB, error) {
	fail := func(format string, args ...any) (*DB, error) {
		return nil, fmt.Errorf("loading geoip database %q: "+format, append([]any{path}, args...)...)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fail("%w", unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return fail("not a regular file")
	}
	if fi.Size() == 0 {
		return fail("file is empty")
	}
	r, err := maxminddb.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fail("%w", pe.Err)
		}
		return fail("not a valid MaxMind database: %w", err)
	}
	if err := r.Verify(); err != nil {
		r.Close()
		return fail("corrupt MaxMind database: %w", err)
	}
	db := &DB{r: r, v4only: r.Metadata.IPVersion == 4}
	if !db.hasCountries() {
		r.Close()
		return fail("database type %q has no country data (country.iso_code); "+
			"use a Country or City database", r.Metadata.DatabaseType)
	}
	return db, nil
}

// unwrapPath drops the *fs.PathError around err, whose message repeats
// the path that Open's errors already name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// hasCountries reports whether one of the first probeRecords records of
// the database has a country code.
func (db *DB) hasCountries() bool {
	n := 0
	for res := range db.r.Networks() {
		if n++; n > probeRecords {
			break
		}
		if decodeCode(res) >= 0 {
			return true
		}
	}
	return false
}

// Country returns the ISO 3166-1 alpha-2 code, in upper case, of the
// country where the database places addr: an IPv4, IPv6 or IPv4-mapped
// IPv6 address (its zone is ignored). ok is false when the database has no
// record for addr or its record names no country: private, loopback and
// other reserved addresses (absent from the public databases), addresses
// outside every network, an IPv6 address in an IPv4-only database, and
// records with only a registered country. The code is one of a fixed table
// of strings, so Country allocates nothing.
func (db *DB) Country(addr netip.Addr) (code string, ok bool) {
	addr = addr.Unmap()
	if !addr.IsValid() || (db.v4only && addr.Is6()) {
		return "", false
	}
	res := db.r.Lookup(addr)
	if !res.Found() {
		return "", false
	}
	off := res.Offset()
	i, hit := db.cache.get(off)
	if !hit {
		i = decodeCode(res)
		db.cache.put(off, i)
	}
	if i < 0 {
		return "", false
	}
	return codeStrings[i], true
}

// decodeCode returns the codeIndex of the country code in a record, or -1
// if it has none or it is not two letters.
func decodeCode(res maxminddb.Result) int {
	p := scratch.Get().(*string)
	err := res.DecodePath(p, isoCodePath...)
	s := *p
	*p = ""
	scratch.Put(p)
	if err != nil {
		return -1
	}
	return stringIndex(s)
}

// Close unmaps the database. Country must not be called during or after
// Close; a second Close does nothing.
func (db *DB) Close() error {
	return db.r.Close()
}
