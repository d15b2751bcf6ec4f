package caddymodule

import (
	"net/http"
	"net/netip"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/geo"
)

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
	header    string     // GeoHeader, canonical; "" without
	untrusted sync.Once  // warns once of the header from an untrusted peer
	file      *countryDB // from GeoIP (geofile.go); nil without
	logger    *zap.Logger
}

// countryDB is the geoip database in force.
type countryDB = watchedDB[geo.DB, *geo.DB]

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
	var err error
	c.file, err = openWatched("geoip database", path, false, geo.Open, countryFields, logger)
	return c, err
}

// countryFields are what the logs say of a geoip database read.
func countryFields(db *geo.DB) []zap.Field {
	info := db.Info()
	return []zap.Field{
		zap.String("type", info.DatabaseType),
		zap.Time("built", info.BuildTime),
		zap.Int("ipv4_ranges", info.IPv4Ranges),
		zap.Int("ipv6_ranges", info.IPv6Ranges),
		zap.Int("table_bytes", info.TableBytes),
	}
}

// cleanup releases the database.
func (c *countries) cleanup() error { return c.file.cleanup() }

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
	if db := c.file.load(); db != nil {
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
