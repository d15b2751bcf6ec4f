package geo

import (
	"encoding/binary"
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

	index uint32 // in its ASNDB's systems
}

// String returns Key, so that an *AS is its own placeholder value.
func (as *AS) String() string { return as.Key }

// ASNDB is an ASN database (GeoLite2-ASN, GeoIP2-ISP, or any MaxMind-format
// database whose records hold autonomous_system_number), read into memory
// by OpenASN, from which Lookup reads an address's autonomous system.
//
// An ASNDB keeps range tables of its own (asn_table.go: an ASN database
// has tens of thousands of distinct values, too many for the country
// tables) and the database's bytes, in which it looks up the few
// addresses the tables leave to the search tree (6to4 and Teredo). It
// keeps no file open and none mapped, so the file may be replaced,
// rewritten or deleted once OpenASN has returned. Lookup is safe for
// concurrent use and allocates nothing.
type ASNDB struct {
	r        *maxminddb.Reader // for the stretches marked viaTree
	t        asnTables
	v4only   bool
	systems  []*AS              // by value-1
	byOffset map[uintptr]uint32 // each record's value (0: no system), by its offset in the data section
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
	// Bytes is the memory the database takes: its file's bytes and its
	// range tables.
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
		return fail("%w", noASNs(r))
	}
	db := &ASNDB{
		r:        r,
		v4only:   r.Metadata.IPVersion == 4,
		byOffset: make(map[uintptr]uint32),
		byNumber: make(map[uint32]*AS),
	}
	if db.t, err = buildASNTables(r, db.value); err != nil { // checkShared bounds the walk
		return fail("corrupt MaxMind database: %w", err)
	}
	db.info = ASNInfo{
		DatabaseType: r.Metadata.DatabaseType,
		BuildTime:    r.Metadata.BuildTime(),
		Systems:      len(db.systems),
		Bytes:        size + db.t.bytes(),
	}
	return db, nil
}

// value is the value of a network's record in the tables: 0 if it has no
// system, else 1 + the system's index in systems. Each record is decoded
// once.
func (db *ASNDB) value(res maxminddb.Result) (uint32, error) {
	if !res.Found() {
		return 0, nil
	}
	off := res.Offset()
	if v, done := db.byOffset[off]; done {
		return v, nil
	}
	var rec asnRecord
	if err := res.Decode(&rec); err != nil {
		return 0, err
	}
	v := uint32(0)
	if rec.Number > 0 {
		as, ok := db.byNumber[rec.Number]
		if !ok {
			as = &AS{Number: rec.Number, Org: rec.Org, Key: "AS" + strconv.FormatUint(uint64(rec.Number), 10), index: uint32(len(db.systems))}
			db.byNumber[rec.Number] = as
			db.systems = append(db.systems, as)
		}
		v = as.index + 1
	}
	db.byOffset[off] = v
	return v, nil
}

// CheckASN tells, quickly, whether the file at path is an ASN database:
// it is there, is a MaxMind database, and one of its first records holds
// an autonomous system number. Its errors are OpenASN's. It does not
// check the whole file as OpenASN does, and reads it memory-mapped: the
// Caddyfile adapter calls it, to name the line of a wrong asn_db.
func CheckASN(path string) error {
	r, err := openFile(path, mapFile)
	if err == nil {
		defer func() { _ = r.Close() }()
		if !hasASNs(r) {
			err = noASNs(r)
		}
	}
	if err != nil {
		return fmt.Errorf("loading ASN database %q: %w", path, err)
	}
	return nil
}

// noASNs is the error of a database without AS numbers.
func noASNs(r *maxminddb.Reader) error {
	return fmt.Errorf("database type %q has no autonomous system numbers (autonomous_system_number); "+
		"use an ASN database such as GeoLite2-ASN", r.Metadata.DatabaseType)
}

// hasASNs reports whether one of the first probeRecords records of the
// database has an autonomous system number. It walks no more than
// 16×probeRecords networks, empty ones included, so that it ends soon on
// a file that has not been checked (CheckASN).
func hasASNs(r *maxminddb.Reader) bool {
	n, seen := 0, 0
	for res := range r.Networks(maxminddb.IncludeNetworksWithoutData()) {
		if seen++; seen > 16*probeRecords || res.Err() != nil {
			break
		}
		if !res.Found() {
			continue
		}
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
	var v uint32
	switch {
	case addr.Is4():
		a := addr.As4()
		v = db.t.v4.find4(binary.BigEndian.Uint32(a[:]))
	case addr.Is6() && !db.v4only:
		if v = db.t.v6.find6(u128From(addr)); v == viaTree {
			v = 0
			if res := db.r.Lookup(addr); res.Found() {
				v = db.byOffset[res.Offset()]
			}
		}
	}
	if v == 0 {
		return nil, false
	}
	return db.systems[v-1], true
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
