package caddymodule

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/geo"
)

// asnDB is how the app tells a client's autonomous system: the ASN
// database (asn_db) in force, shared through geoDatabases and checked on
// disk as the geoip database is (geofile.go).
type asnDB = watchedDB[geo.ASNDB, *geo.ASNDB]

// provisionASNDB opens the ASN database at path (shared through
// geoDatabases).
func provisionASNDB(path string, logger *zap.Logger) (*asnDB, error) {
	return openWatched("ASN database", path, true, geo.OpenASN, asnFields, logger)
}

// asnFields are what the logs say of an ASN database read.
func asnFields(db *geo.ASNDB) []zap.Field {
	info := db.Info()
	return []zap.Field{
		zap.String("type", info.DatabaseType),
		zap.Time("built", info.BuildTime),
		zap.Int("systems", info.Systems),
		zap.Int("bytes", info.Bytes),
	}
}

// network is the client's autonomous system for one request, looked up
// once for all of a handler's rules that need it (a key by asn, an
// asn_multiplier).
type network struct {
	looked bool
	as     *geo.AS // nil when unknown
}

// of looks up the autonomous system of q's client in nets, once, and sets
// {http.rate_limit.asn} and {http.rate_limit.asn_org} (empty when
// unknown). The placeholders' values are the database's own AS, read
// through String, so setting them allocates nothing.
func (n *network) of(nets *asnDB, q *request) (*geo.AS, bool) {
	if n.looked {
		return n.as, n.as != nil
	}
	n.looked = true
	if nets != nil {
		if addr, err := netip.ParseAddr(q.clientIP()); err == nil {
			n.as, _ = nets.load().Lookup(addr)
		}
	}
	if n.as == nil {
		q.repl.Set("http.rate_limit.asn", emptyValue)
		q.repl.Set("http.rate_limit.asn_org", emptyValue)
		return nil, false
	}
	q.repl.Set("http.rate_limit.asn", n.as)
	q.repl.Set("http.rate_limit.asn_org", (*asOrg)(n.as))
	return n.as, true
}

// asOrg is an AS as {http.rate_limit.asn_org} shows it: its organization.
type asOrg geo.AS

func (o *asOrg) String() string { return o.Org }

// asnKey is the AS's key ("AS15169"), or "" when unknown (see the asn key
// source).
func asnKey(as *geo.AS, ok bool) string {
	if !ok {
		return ""
	}
	return as.Key
}

// asnShown is the request's autonomous system as a denial's log line and
// event show it: "AS15169", or "" when unknown.
func asnShown(q *request) string {
	return asnKey(q.net.as, q.net.as != nil)
}
