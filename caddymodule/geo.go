package caddymodule

import (
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/geo"
)

// geoDatabases holds the open geoip and ASN databases, process-wide, so
// that a config reload that names the same unchanged file shares the open
// one instead of reading it again. A database is closed when the last
// config using it is cleaned up.
var geoDatabases = caddy.NewUsagePool()

// geoFile identifies a database file as it is on disk, and as what it is
// read: a reload that finds the file changed (rebuilt, or replaced by a
// newer release) opens it anew.
type geoFile struct {
	path     string
	asn      bool // read as an ASN database (asn_db), not a country one
	size     int64
	modified time.Time
}

// pooledDB is an open database in the pool.
type pooledDB[T interface{ Close() error }] struct{ db T }

// Destruct closes the database when its last user is gone.
func (p pooledDB[T]) Destruct() error { return p.db.Close() }

// openPooled returns the database at path, read by open (as an ASN
// database if asn), shared with earlier configs if the file has not
// changed since they opened it, and the pool key to release.
func openPooled[T interface{ Close() error }](path string, asn bool, open func(string) (T, error)) (T, geoFile, error) {
	key := geoFile{path: path, asn: asn}
	if fi, err := os.Stat(path); err == nil {
		key.size, key.modified = fi.Size(), fi.ModTime()
	}
	v, _, err := geoDatabases.LoadOrNew(key, func() (caddy.Destructor, error) {
		db, err := open(path)
		if err != nil {
			return nil, err
		}
		return pooledDB[T]{db}, nil
	})
	if err != nil {
		var zero T
		return zero, key, err
	}
	return v.(pooledDB[T]).db, key, nil
}

// country is the client's country for one request, looked up once for all
// of a handler's rules that need it.
type country struct {
	looked bool
	code   string // upper case; "" when unknown
	ok     bool
}

// of looks up the country of r's client, once: from the app's geo_header
// if the request came through a trusted proxy and the header names a
// country, else from the geoip database by client IP. It sets
// {http.rate_limit.country} (empty when unknown).
func (c *country) of(a *App, q *request) (string, bool) {
	if c.looked {
		return c.code, c.ok
	}
	c.looked = true
	c.code, c.ok = a.countryOf(q.r, q.clientIP())
	q.repl.Set("http.rate_limit.country", boxedCountry(c.code))
	return c.code, c.ok
}

// countries is how the app tells a client's country: the geoip database
// (GeoIP), a trusted proxy's header (GeoHeader), or both, the header
// first.
type countries struct {
	header    string                 // GeoHeader, canonical; "" without
	untrusted sync.Once              // warns once of the header from an untrusted peer
	db        atomic.Pointer[geo.DB] // from GeoIP, swapped by the file check; nil without
	file      *geoFile               // its key in geoDatabases, to release; nil without
	seen      geoFile                // the file as last read, for the file check
	logger    *zap.Logger
}

// provisionCountries opens the database at path (if any; shared through
// geoDatabases) and takes the header's name (if any).
func provisionCountries(path, header string, logger *zap.Logger) (*countries, error) {
	c := &countries{logger: logger}
	if header != "" {
		c.header = http.CanonicalHeaderKey(header)
	}
	if path == "" {
		return c, nil
	}
	db, file, err := openPooled(caddy.NewReplacer().ReplaceKnown(path, ""), false, geo.Open)
	if err != nil {
		return nil, err
	}
	c.db.Store(db)
	c.file, c.seen = &file, file
	info := db.Info()
	logger.Info("geoip database",
		zap.String("path", file.path),
		zap.String("type", info.DatabaseType),
		zap.Time("built", info.BuildTime),
		zap.Int("ipv4_ranges", info.IPv4Ranges),
		zap.Int("ipv6_ranges", info.IPv6Ranges),
		zap.Int("table_bytes", info.TableBytes))
	return c, nil
}

// cleanup releases the database.
func (c *countries) cleanup() error { return release(&c.file) }

// release releases a database's key in geoDatabases, once: *file is nil
// after.
func release(file **geoFile) error {
	if *file == nil {
		return nil
	}
	_, err := geoDatabases.Delete(**file)
	*file = nil
	return err
}

// countryOf is the country of r's client, at address ip, or ok=false.
func (a *App) countryOf(r *http.Request, ip string) (string, bool) {
	c := a.geo
	if c == nil {
		return "", false
	}
	if c.header != "" {
		if vs := r.Header[c.header]; len(vs) > 0 {
			if fromTrustedProxy(r) {
				if code, ok := geo.ParseCountry(vs[0]); ok {
					return code, true
				}
			} else {
				c.untrusted.Do(func() {
					c.logger.Warn("geo_header: a request carries the header but does not come from one of the server's trusted_proxies, so the header is ignored; if a proxy or CDN in front of Caddy sets it, add its addresses to trusted_proxies",
						zap.String("header", c.header), zap.String("peer", r.RemoteAddr))
				})
			}
		}
	}
	if db := c.db.Load(); db != nil {
		if addr, err := netip.ParseAddr(ip); err == nil {
			return db.Country(addr)
		}
	}
	return "", false
}

// fromTrustedProxy is true if the request's immediate peer is one of the
// server's trusted_proxies.
func fromTrustedProxy(r *http.Request) bool {
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted
}

// countryValues holds every upper-case two-letter code as an interface
// value, so that setting the placeholder allocates nothing.
var countryValues = func() (t [26 * 26]any) {
	for i := range t {
		t[i] = string([]byte{byte('A' + i/26), byte('A' + i%26)})
	}
	return t
}()

// emptyValue is the value of a placeholder for an unknown country or
// autonomous system.
var emptyValue any = ""

// boxedCountry is code, an upper-case two-letter code or "", as an
// interface value.
func boxedCountry(code string) any {
	if len(code) != 2 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' {
		return emptyValue
	}
	return countryValues[int(code[0]-'A')*26+int(code[1]-'A')]
}

// checkFile reads the geoip file again if it changed since it was last
// read, and puts the new database in force. It reports whether it did. A
// file that cannot be read is logged; the database in force stays.
func (c *countries) checkFile() bool {
	if c.file == nil {
		return false
	}
	path := c.seen.path
	fi, err := os.Stat(path)
	if err != nil {
		c.logger.Error("geoip database: checking the file", zap.String("path", path), zap.Error(err))
		return false
	}
	if fi.Size() == c.seen.size && fi.ModTime().Equal(c.seen.modified) {
		return false
	}
	db, err := geo.Open(path)
	if err != nil {
		c.logger.Error("geoip database changed but cannot be read; the one in force stays", zap.Error(err))
		c.seen.size, c.seen.modified = fi.Size(), fi.ModTime() // not again until it changes again
		return false
	}
	c.db.Store(db) // readers holding the old one may finish with it: Close frees nothing they use
	c.seen.size, c.seen.modified = fi.Size(), fi.ModTime()
	info := db.Info()
	c.logger.Info("geoip database changed on disk and was read again",
		zap.String("path", path), zap.String("type", info.DatabaseType), zap.Time("built", info.BuildTime))
	return true
}
