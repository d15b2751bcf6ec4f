package geo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"

	"github.com/oschwald/maxminddb-golang/v2"
)

// DB is a MaxMind-format database (GeoLite2 or GeoIP2 Country or City,
// DB-IP Country or City, or any database whose records hold
// country.iso_code), read into memory by Open, from which Country reads an
// address's country.
//
// A DB holds only tables in memory, which it never changes: Country is safe
// for concurrent use by any number of goroutines and allocates nothing, and
// the file may be replaced, rewritten or deleted once Open has returned.
// Opening a database takes a while and some memory (see Open), so a DB is
// meant to be opened once per process and shared (see the package
// documentation).
type DB struct {
	v4     table4
	v6     table6 // empty if v4only
	v4only bool   // an IPv4-only database, where IPv6 addresses have no country
	info   Info
}

// isoCodePath is the path to a record's country code.
var isoCodePath = []any{"country", "iso_code"}

// probeRecords is how many records Open reads, at most, looking for one with
// a country code.
const probeRecords = 256

// Open reads the database at path into memory. The error names the path
// and says what is wrong: the file is missing or unreadable, is not a
// MaxMind database or is corrupt, or holds no country data (an ASN or ISP
// database, say).
//
// Open first checks the whole file, as MaxMind's verifier does, so that a
// corrupt database fails here, at config load, and never on a request.
// It then walks every network of the database, reads each distinct
// record's country code once, and keeps only a table of address ranges
// and their countries: the file is closed and unmapped before Open
// returns, and may change or go away afterwards without harm. While Open
// runs, the file is memory-mapped and must not be rewritten in place.
//
// For a City database of a million networks, Open takes a few seconds on a
// small server, most of them spent checking the file, and allocates some
// hundreds of megabytes along the way (the checker decodes every record),
// which the garbage collector then frees. The table takes about 4 bytes
// per IPv4 range of addresses with one country and 10 per IPv6 one, plus
// under 1 MB of indexes: some megabytes for a Country or City database
// (10 MB for 1.6 million ranges). Info tells the figures of a DB.
func Open(path string) (*DB, error) {
	fail := func(format string, args ...any) (*DB, error) {
		return nil, fmt.Errorf("loading geoip database %q: "+format, append([]any{path}, args...)...)
	}
	r, err := openVerified(path, mapFile)
	if err != nil {
		return fail("%w", err)
	}
	defer func() { _ = r.Close() }() // unmaps the file: the DB keeps nothing of it
	if !hasCountries(r) {
		return fail("database type %q has no country data (country.iso_code); "+
			"use a Country or City database", r.Metadata.DatabaseType)
	}
	v4, v6, err := buildTables(r)
	if err != nil {
		return fail("corrupt MaxMind database: %w", err)
	}
	db := &DB{v4: v4, v6: v6, v4only: r.Metadata.IPVersion == 4}
	db.info = Info{
		DatabaseType: r.Metadata.DatabaseType,
		BuildTime:    r.Metadata.BuildTime(),
		IPv4Ranges:   v4.ranges,
		IPv6Ranges:   v6.ranges,
		TableBytes:   v4.bytes() + v6.bytes(),
	}
	return db, nil
}

// openVerified opens the database at path with open (openFile) and checks
// the whole of it (Verify and checkShared). Its errors say what is wrong
// without naming the path, which the caller's do.
func openVerified(path string, open func(string) (*maxminddb.Reader, error)) (*maxminddb.Reader, error) {
	r, err := openFile(path, open)
	if err != nil {
		return nil, err
	}
	err = r.Verify()
	if err == nil {
		err = checkShared(r)
	}
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("corrupt MaxMind database: %w", err)
	}
	return r, nil
}

// openFile opens the database at path with open, after checking that it
// is a regular, non-empty file.
func openFile(path string, open func(string) (*maxminddb.Reader, error)) (*maxminddb.Reader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() == 0 {
		return nil, errors.New("file is empty")
	}
	r, err := open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, fmt.Errorf("not a valid MaxMind database: %w", err)
	}
	return r, nil
}

// mapFile opens the database at path memory-mapped.
func mapFile(path string) (*maxminddb.Reader, error) { return maxminddb.Open(path) }

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
func hasCountries(r *maxminddb.Reader) bool {
	n := 0
	for res := range r.Networks() {
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
// records with only a registered country. The answers are those of a
// lookup in the database file with maxminddb, aliases of the IPv4 networks
// (such as 6to4, 2002::/16) included. The code is one of a fixed table of
// strings, so Country allocates nothing.
func (db *DB) Country(addr netip.Addr) (code string, ok bool) {
	var v uint16
	switch {
	case addr.Is4():
		a := addr.As4()
		v = db.v4.find(binary.BigEndian.Uint32(a[:]))
	case addr.Is4In6():
		a := addr.As16()
		v = db.v4.find(binary.BigEndian.Uint32(a[12:]))
	case addr.Is6() && !db.v4only:
		a := addr.As16()
		v = db.find6(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]))
	}
	if v == 0 {
		return "", false
	}
	return codeStrings[v-1], true
}

// decodeCode returns the codeIndex of the country code in a record, or -1
// if it has none or it is not two letters.
func decodeCode(res maxminddb.Result) int {
	var s string
	if err := res.DecodePath(&s, isoCodePath...); err != nil {
		return -1
	}
	return stringIndex(s)
}

// Close does nothing and returns nil: a DB holds no file, mapping or other
// resource but memory, which the garbage collector frees once the DB is no
// longer used. It is there for users that manage a DB's lifetime; Country
// keeps working after it, and a second Close does nothing either.
func (db *DB) Close() error {
	return nil
}
