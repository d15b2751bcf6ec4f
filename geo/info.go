package geo

import "time"

// Info describes an open database, for logs: what it is, and what its
// tables take.
type Info struct {
	// DatabaseType is the type the database's metadata names, such as
	// "GeoLite2-Country" or "DBIP-City-Lite".
	DatabaseType string
	// BuildTime is when the database was built (its build_epoch).
	BuildTime time.Time
	// IPv4Ranges and IPv6Ranges are the numbers of ranges in the tables:
	// runs of adjacent addresses with one country, or none. Aliases of the
	// IPv4 networks (6to4 and the like) count as IPv6 ranges.
	IPv4Ranges, IPv6Ranges int
	// TableBytes is the memory that the tables take, indexes included.
	TableBytes int
}

// Info describes the database.
func (db *DB) Info() Info {
	return db.info
}
