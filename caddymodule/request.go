package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/edgebyte/edgelimit/caddymodule/ruleconfig"
	"github.com/edgebyte/edgelimit/geo"
)

// request is one request as a handler's rules read it. What several rules
// may need is resolved at the first rule that needs it, then kept: the
// client address (looked up once, however many rules and key sources read
// it), the country and the autonomous system. It lives on ServeHTTP's stack.
type request struct {
	r    *http.Request
	repl *caddy.Replacer
	now  time.Time

	ip     string // the client address, once ipDone
	ipDone bool
	where  country
	net    network
}

// readRequest is r as the rules read it, decided at now.
func readRequest(r *http.Request, now time.Time) request {
	return request{r: r, repl: r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer), now: now}
}

// clientIP is the request's client address (see clientIP), looked up once.
func (q *request) clientIP() string {
	if !q.ipDone {
		q.ip, q.ipDone = clientIP(q.r), true
	}
	return q.ip
}

// country is the client's country (see country.of), looked up once.
func (q *request) country(a *App) (string, bool) { return q.where.of(a, q) }

// asn is the client's autonomous system (see network.of), looked up once.
func (q *request) asn(nets *asnDB) (*geo.AS, bool) { return q.net.of(nets, q) }

// facts is what one rule decides a request by.
type facts struct {
	key   string
	cost  int64
	scale float64 // the tier's, the country's, the network's and the key's override's factors
}

// factsOf resolves what ru decides q by. use is false when ru does not
// apply (no match, an exempt client, a missing key that passes); err is
// the request's answer when it cannot be decided (a matcher's error: 500;
// a bad cost: 400; a missing key with on_missing_key deny: 403).
func (ru *rule) factsOf(a *App, q *request) (f facts, use bool, err error) {
	if ok, err := ru.matches(q.r); err != nil || !ok {
		if err != nil {
			return f, false, caddyhttp.Error(http.StatusInternalServerError, err)
		}
		return f, false, nil
	}
	if ru.exempts(q) {
		ru.stats.exempt.add(q.clientIP())
		return f, false, nil
	}
	key, ok := keyOf(ru.keys, q)
	if !ok {
		if o := ru.stats.observe; o != nil {
			o.o.Keyless(o.rule)
		}
		switch ru.OnMissingKey {
		case ruleconfig.MissingIP:
			key = fallbackKey(q.clientIP())
		case ruleconfig.MissingDeny:
			ru.stats.denied.add("")
			return f, false, caddyhttp.Error(http.StatusForbidden, errNoKey{ru.Name})
		default:
			return f, false, nil
		}
	}
	if ru.KeyHash != "" || ru.clustered && len(key) > maxSharedKeyBytes {
		key = hashedKey(key)
	}
	cost, err := ru.costOf(q.repl)
	if err != nil {
		return f, false, caddyhttp.Error(http.StatusBadRequest, err)
	}
	scale := ru.tierScale(q)
	if ru.hasGeo {
		scale *= ru.geo.For(q.country(a))
	}
	if ru.hasASN {
		scale *= ru.asn.For(q.asn(a.asn))
	}
	scale *= ru.overrideScale(key, q.now) // overrides.go
	return facts{key: key, cost: cost, scale: scale}, true, nil
}

// errNoKey is the error of a request refused for want of a key.
type errNoKey struct{ rule string }

func (e errNoKey) Error() string { return "rate limit " + e.rule + ": request has no key" }

// clientIP is the request's client address as Caddy sees it ({client_ip}:
// the peer, or the forwarded address when the peer is a trusted proxy).
// An IPv4 client seen through an IPv6 socket is keyed by its IPv4 address.
func clientIP(r *http.Request) string {
	ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if !ok || ip == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		ip = host
	}
	if strings.HasPrefix(ip, "::ffff:") {
		if a, err := netip.ParseAddr(ip); err == nil {
			return a.Unmap().String()
		}
	}
	return ip
}

// matches is true if the rule's matchers match the request.
func (ru *rule) matches(r *http.Request) (bool, error) {
	if len(ru.matchers) == 0 {
		return true, nil
	}
	return ru.matchers.AnyMatchWithError(r)
}

// exempts is true if the client is in one of the rule's exempt ranges.
func (ru *rule) exempts(q *request) bool {
	if len(ru.exempt) == 0 {
		return false
	}
	addr, err := netip.ParseAddr(q.clientIP())
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range ru.exempt {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// costOf is the units the request takes.
func (ru *rule) costOf(repl *caddy.Replacer) (int64, error) {
	if ru.costText == "" {
		return ru.cost, nil
	}
	v := repl.ReplaceKnown(ru.costText, "")
	if v == "" {
		return 1, nil // the placeholder is empty: the default cost
	}
	// At least 1: a cost of 0 takes nothing and always passes, so a cost
	// a client can influence must not be able to reach it.
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("rate limit %s: cost %q is not a whole number ≥ 1", ru.Name, v)
	}
	return n, nil
}
