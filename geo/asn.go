package geo

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
)

// AS is an autonomous system as an ASN database records it. The ASes of
// an ASNDB are made once, at OpenASN, and shared by every lookup: they
// must not be changed.
type AS struct {
	// Number is the autonomous system number, above 0 (15169).
	Number uint32
	// Org is the organization the database names for it ("GOOGLE"); ""
	// if it names none. Of records that give one number several names,
	// the first in address order is kept.
	Org string
	// Key is the number as the key and placeholder show it: "AS15169".
	Key string
}

// String returns Key, so that an *AS is its own placeholder value.
func (as *AS) String() string { return as.Key }

// ASNDB is an ASN database (GeoLite2-ASN, GeoIP2-ISP, or any MaxMind-format
// database whose records hold autonomous_system_number), read into memory
// by OpenASN, from which Lookup reads an address's autonomous system.
//
// Unlike a DB, an ASNDB keeps the database's bytes (a GeoLite2-ASN file
// is about 10 MB) and looks addresses up in its search tree, as maxminddb
// does, with a table of the records' ASes: an ASN database has tens of
// thousands of distinct values, too many for the country tables. It keeps
// no file open and none mapped, so the file may be replaced, rewritten or
// deleted once OpenASN has returned. Lookup is safe for concurrent use and
// allocates nothing.
type ASNDB struct {
	r        *maxminddb.Reader
	v4only   bool
	byOffset map[uintptr]*AS // each record's AS, by its offset in the data section
	byNumber map[uint32]*AS
	info     ASNInfo
}

// ASNInfo describes an open ASN database, for logs.
type ASNInfo struct {
	// DatabaseType is the type the database's metadata names, such as
	// "GeoLite2-ASN".
	DatabaseType string
	// BuildTime is when the database was built (its build_epoch).
	BuildTime time.Time
	// Systems is the number of distinct autonomous systems it names.
	Systems int
	// Bytes is the memory the database takes: its file's bytes.
	Bytes int
}

// asnPath is the path to a record's autonomous system number.
var asnPath = []any{"autonomous_system_number"}

// asnRecord is the part of a record that OpenASN reads.
type asnRecord struct {
	Number uint32 `maxminddb:"autonomous_system_number"`
	Org    string `maxminddb:"autonomous_system_organization"`
}

// OpenASN reads the ASN database at path into memory. The error names the
// path and says what is wrong: the file is missing or unreadable, is not a
// MaxMind database or is corrupt, or holds no autonomous system numbers
// (a Country or City database, say). Like Open, it checks the whole file
// first, so that a corrupt database fails at config load, then reads each
// distinct record once.
func OpenASN(path string) (*ASNDB, error) {
	fail := func(format string, args ...any) (*ASNDB, error) {
		return nil, fmt.Errorf("loading ASN database %q: "+format, append([]any{path}, args...)...)
	}
	size := 0
	r, err := openVerified(path, func(p string) (*maxminddb.Reader, error) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		size = len(data)
		return maxminddb.OpenBytes(data)
	})
	if err != nil {
		return fail("%w", err)
	}
	if !hasASNs(r) {
		return fail("database type %q has no autonomous system numbers (autonomous_system_number); "+
			"use an ASN database such as GeoLite2-ASN", r.Metadata.DatabaseType)
	}
	db := &ASNDB{
		r:        r,
		v4only:   r.Metadata.IPVersion == 4,
		byOffset: make(map[uintptr]*AS),
		byNumber: make(map[uint32]*AS),
	}
	for res := range r.Networks() { // checkShared bounds the walk
		if err := db.add(res); err != nil {
			return fail("corrupt MaxMind database: %w", err)
		}
	}
	db.info = ASNInfo{
		DatabaseType: r.Metadata.DatabaseType,
		BuildTime:    r.Metadata.BuildTime(),
		Systems:      len(db.byNumber),
		Bytes:        size,
	}
	return db, nil
}

// add reads the AS of a network's record, once a record.
func (db *ASNDB) add(res maxminddb.Result) error {
	if err := res.Err(); err != nil {
		return err
	}
	if !res.Found() {
		return nil
	}
	off := res.Offset()
	if _, done := db.byOffset[off]; done {
		return nil
	}
	var rec asnRecord
	if err := res.Decode(&rec); err != nil {
		return err
	}
	if rec.Number == 0 {
		db.byOffset[off] = nil // no ASN: unknown
		return nil
	}
	as, ok := db.byNumber[rec.Number]
	if !ok {
		as = &AS{Number: rec.Number, Org: rec.Org, Key: "AS" + strconv.FormatUint(uint64(rec.Number), 10)}
		db.byNumber[rec.Number] = as
	}
	db.byOffset[off] = as
	return nil
}

// hasASNs reports whether one of the first probeRecords records of the
// database has an autonomous system number.
func hasASNs(r *maxminddb.Reader) bool {
	n := 0
	for res := range r.Networks() {
		if n++; n > probeRecords {
			break
		}
		var asn uint32
		if res.DecodePath(&asn, asnPath...) == nil && asn > 0 {
			return true
		}
	}
	return false
}

// Lookup returns the autonomous system the database places addr in: an
// IPv4, IPv6 or IPv4-mapped IPv6 address (its zone is ignored). ok is
// false when the database has no record for addr (private and reserved
// addresses, addresses outside every network, an IPv6 address in an
// IPv4-only database) or its record has no number. The answers are those
// of a lookup in the database file with maxminddb. Lookup allocates
// nothing: the AS is the database's own.
func (db *ASNDB) Lookup(addr netip.Addr) (as *AS, ok bool) {
	addr = addr.Unmap()
	if !addr.IsValid() || db.v4only && addr.Is6() {
		return nil, false
	}
	res := db.r.Lookup(addr)
	if !res.Found() {
		return nil, false
	}
	as = db.byOffset[res.Offset()]
	return as, as != nil
}

// System returns the autonomous system numbered n, if the database names
// it.
func (db *ASNDB) System(n uint32) (as *AS, ok bool) {
	as, ok = db.byNumber[n]
	return as, ok
}

// Info describes the database.
func (db *ASNDB) Info() ASNInfo {
	return db.info
}

// Close does nothing and returns nil, as DB.Close: an ASNDB holds nothing
// but memory.
func (db *ASNDB) Close() error {
	return nil
}
