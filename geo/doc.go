// Package geo tells which country and which autonomous system a client
// address is in, and what factor a rule's geo_multiplier gives that country
// and its asn_multiplier that system.
//
// A DB reads a MaxMind-format database: GeoLite2 or GeoIP2 Country or City,
// DB-IP Country or City, or any .mmdb whose records hold country.iso_code.
// Open checks the whole file, so a missing, unreadable, corrupt or
// country-less database (an ASN one, say) is an error at config load that
// names the path, never a surprise on a request. Open then reads every
// network of the database into a table of address ranges and their
// countries, and closes the file: the DB keeps no file open and no file
// mapped, so the file may be replaced, rewritten in place or deleted at any
// time after. Opening a City database takes seconds, most of them spent
// checking the file, and allocates many times the file's size along the
// way, which the garbage collector then frees; the table it keeps takes a
// few megabytes to a few tens (DB.Info tells). So a DB is meant to be
// opened once per process and shared by every rule and across config
// reloads (the Caddy module keeps it in a usage pool).
//
// DB.Country returns the ISO 3166-1 alpha-2 code, in upper case, for IPv4,
// IPv6 and IPv4-mapped IPv6 addresses. ok=false means the country is
// unknown: the database has no record for the address (private, loopback
// and other reserved addresses, or public ones outside every network) or
// its record names no country. The answers are those that maxminddb's
// lookup in the file gives. Country reads a few words of the table, is safe
// for concurrent use and allocates nothing: codes come from a fixed table
// of strings.
//
// Multipliers hold the per-country factors, parsed from the Caddyfile form
// (ParseMultipliers: "RU 1.5 US 1.0 default 0.5") or the JSON and YAML
// form (FromMap). Multipliers.For takes Country's results as they are and
// gives the default, 1 unless set, for an unknown country.
//
//	code, ok := db.Country(clientIP)
//	factor := multipliers.For(code, ok) // 0 blocks
//
// An ASNDB reads an ASN database (GeoLite2-ASN, GeoIP2-ISP, or any .mmdb
// whose records hold autonomous_system_number): OpenASN checks the file as
// Open does and refuses one without AS numbers (a Country database, say),
// then keeps the database's bytes in memory, with one AS per autonomous
// system, so that ASNDB.Lookup allocates nothing. ASNMultipliers are the
// per-system factors, in the same two forms ("AS15169 0.5 default 1";
// {"AS15169": 0.5}).
//
//	as, ok := asns.Lookup(clientIP) // as.Key is "AS15169"
//	factor *= asnMultipliers.For(as, ok)
//
// The package is plain Go: it never imports Caddy, so it is tested and
// fuzzed without a server.
package geo
