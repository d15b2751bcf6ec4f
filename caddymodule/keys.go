package caddymodule

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// keySource is one part of a rule's key (one word of `by`).
type keySource struct {
	kind   sourceKind
	name   string  // header (canonical), query or cookie name; placeholder text; claim path
	v4, v6 int     // prefix lengths, for sourceIPPrefix
	mask   bool    // shorten a value that is an IP address to v4/v6 bits (ipv4_prefix, ipv6_prefix)
	inText bool    // for sourcePlaceholder: the text holds a header, query or cookie placeholder
	tokens *tokens // for sourceJWT: the app's, set at provision
	asns   *asnDB  // for sourceASN: the app's, set at provision
}

type sourceKind uint8

const (
	sourceIP sourceKind = iota
	sourceIPPrefix
	sourceUserID
	sourceHeader
	sourceQuery
	sourceCookie
	sourcePlaceholder
	sourceJWT
	sourceASN
)

// keySeparator joins the parts of a composite key; it cannot appear in a
// header value.
const keySeparator = "\x1f"

// parseKeySources reads `by` words: "ip", "ip/24", "ip/24/64", "asn", "user_id",
// "header NAME", "query NAME", "cookie NAME", "static TEXT", or placeholder
// text.
func parseKeySources(by []string) ([]keySource, error) {
	if len(by) == 0 {
		return []keySource{{kind: sourceIP}}, nil
	}
	srcs := make([]keySource, 0, len(by))
	for _, word := range by {
		src, err := parseKeySource(word)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	return srcs, nil
}

func parseKeySource(word string) (keySource, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(word), " ")
	arg = strings.TrimSpace(arg)
	needArg := func(k sourceKind) (keySource, error) {
		if arg == "" || strings.ContainsAny(arg, " \t") {
			return keySource{}, fmt.Errorf("by %s: want one name, as in `by %s NAME`", kind, kind)
		}
		if k == sourceHeader {
			arg = http.CanonicalHeaderKey(arg)
		}
		return keySource{kind: k, name: arg}, nil
	}
	switch {
	case kind == "ip" && arg == "":
		return keySource{kind: sourceIP}, nil
	case strings.HasPrefix(kind, "ip/") && arg == "":
		return parseIPPrefixSource(kind)
	case kind == "user_id" && arg == "":
		return keySource{kind: sourceUserID}, nil
	case kind == "asn" && arg == "":
		return keySource{kind: sourceASN}, nil
	case kind == "header":
		return needArg(sourceHeader)
	case kind == "query":
		return needArg(sourceQuery)
	case kind == "cookie":
		return needArg(sourceCookie)
	case kind == "static":
		// a constant key: one counter shared by every request (what a
		// caddy-ratelimit zone key without placeholders means)
		return needArg(sourcePlaceholder)
	case kind == "jwt":
		return needArg(sourceJWT)
	case strings.Contains(word, "{"):
		return placeholderSource(word), nil
	}
	return keySource{}, fmt.Errorf("by %q: want ip, ip/V4LEN[/V6LEN], asn, user_id, header NAME, query NAME, cookie NAME, jwt CLAIM, static TEXT or a {placeholder}", word)
}

// placeholderSources are the placeholders that name one request header,
// query parameter or cookie, and the source that reads it.
var placeholderSources = []struct {
	prefix string
	kind   sourceKind
}{
	{"{http.request.header.", sourceHeader},
	{"{http.request.uri.query.", sourceQuery},
	{"{http.request.cookie.", sourceCookie},
}

// placeholderSource is the source of placeholder text. A placeholder that
// is a header, a query parameter or a cookie alone reads it as `header`,
// `query` and `cookie` do, so that a value sent twice counts as missing
// (Caddy's placeholder would join two headers, or take the first query
// value, giving a client a fresh key for every first value) and a cookie
// is decoded. Inside other text they are read the same way (see
// placeholderText).
func placeholderSource(word string) keySource {
	inText := false
	for _, p := range placeholderSources {
		name, ok := strings.CutPrefix(word, p.prefix)
		if name, ok = strings.CutSuffix(name, "}"); ok && name != "" && !strings.ContainsAny(name, "{}") {
			if p.kind == sourceHeader {
				name = http.CanonicalHeaderKey(name)
			}
			return keySource{kind: p.kind, name: name}
		}
		inText = inText || strings.Contains(word, p.prefix)
	}
	return keySource{kind: sourcePlaceholder, name: word, inText: inText}
}

// placeholderText is text with its placeholders replaced: a header, query
// or cookie placeholder by what the source of that name reads (a cookie
// decoded; a value sent twice empty, one key for all such requests rather
// than a fresh key for every first value), the others by Caddy's replacer.
// An unknown placeholder stays as written, as ReplaceKnown leaves it.
func placeholderText(q *request, text string) string {
	out, _ := q.repl.ReplaceFunc(text, func(name string, val any) (any, error) {
		if src := placeholderSource("{" + name + "}"); src.kind != sourcePlaceholder {
			return src.raw(q), nil
		}
		if val == nil {
			return "{" + name + "}", nil
		}
		return val, nil
	})
	return out
}

// parseIPPrefixSource reads "ip/24" or "ip/24/64".
func parseIPPrefixSource(word string) (keySource, error) {
	parts := strings.Split(word, "/")
	if len(parts) > 3 {
		return keySource{}, fmt.Errorf("by %s: want ip/V4LEN or ip/V4LEN/V6LEN", word)
	}
	src := keySource{kind: sourceIPPrefix, v4: 32, v6: 128}
	v4, err := strconv.Atoi(parts[1])
	if err != nil || v4 < 0 || v4 > 32 {
		return keySource{}, fmt.Errorf("by %s: IPv4 prefix length %q must be 0 to 32", word, parts[1])
	}
	src.v4 = v4
	if len(parts) == 3 {
		v6, err := strconv.Atoi(parts[2])
		if err != nil || v6 < 0 || v6 > 128 {
			return keySource{}, fmt.Errorf("by %s: IPv6 prefix length %q must be 0 to 128", word, parts[2])
		}
		src.v6 = v6
	} else {
		src.v6 = 64 // an IPv6 client's own subnet: it may rotate addresses within it at will
	}
	return src, nil
}

// fallbackKey is the key of a request keyed by client IP because its own
// key is missing (on_missing_key ip). The NUL it starts with cannot occur in
// a key part (keyOf refuses control characters), so no header or query
// value can name another client's fallback counter.
func fallbackKey(ip string) string { return "\x00" + ip }

// withPrefixes makes every source shorten a value that is an IP address
// to v4 or v6 bits (0: the whole address).
func withPrefixes(srcs []keySource, v4, v6 int) {
	if v4 == 0 && v6 == 0 {
		return
	}
	for i := range srcs {
		if srcs[i].kind != sourceIPPrefix {
			srcs[i].mask, srcs[i].v4, srcs[i].v6 = true, cmp.Or(v4, 32), cmp.Or(v6, 128)
		}
	}
}

// value is this source's part of the key, "" when the request has none.
func (src keySource) value(q *request) string {
	v := src.raw(q)
	if !src.mask || v == "" {
		return v
	}
	addr, err := netip.ParseAddr(v)
	if err != nil {
		return v // not an address: kept whole, as caddy-ratelimit does
	}
	return prefixOf(addr, src.v4, src.v6)
}

// prefixOf is addr's network of v4 or v6 bits, as text ("192.0.2.0/24").
func prefixOf(addr netip.Addr, v4, v6 int) string {
	addr = addr.Unmap()
	bits := v6
	if addr.Is4() {
		bits = v4
	}
	p, _ := addr.Prefix(bits)
	return p.String()
}

// raw is this source's value, before any prefix.
func (src keySource) raw(q *request) string {
	r, repl := q.r, q.repl
	switch src.kind {
	case sourceIP:
		return q.clientIP()
	case sourceIPPrefix:
		addr, err := netip.ParseAddr(q.clientIP())
		if err != nil {
			return ""
		}
		return prefixOf(addr, src.v4, src.v6)
	case sourceASN:
		return asnKey(q.asn(src.asns))
	case sourceUserID:
		v, _ := repl.GetString("http.auth.user.id")
		return v
	case sourceJWT:
		if src.tokens == nil {
			return ""
		}
		v, _ := src.tokens.claim(r, src.name)
		return v
	case sourceHeader:
		if vs := r.Header[src.name]; len(vs) == 1 {
			return vs[0]
		}
		return "" // absent, or sent twice: which one would the backend read?
	case sourceQuery:
		return queryValue(r.URL.RawQuery, src.name)
	case sourceCookie:
		if cs := r.CookiesNamed(src.name); len(cs) == 1 {
			return cookieText(cs[0].Value)
		}
		return ""
	case sourcePlaceholder:
		if src.inText {
			return placeholderText(q, src.name)
		}
	}
	return repl.ReplaceKnown(src.name, "")
}

// cookieText is a cookie's value as the backend reads it, so that every
// spelling of one value is one key: percent-decoded as url.QueryUnescape
// decodes (PHP's $_COOKIE and Rails decode so, Express with
// decodeURIComponent; sid=%61bc is sid=abc), once, and a + is a space
// whether it was sent as + (a space to PHP) or %2B (a + to Express, which
// leaves a + sent as + alone), so that neither kind of backend sees one
// value that is two keys here. A value that does not decode (a % not
// followed by two hex digits) is kept as sent, as Express keeps it.
func cookieText(v string) string {
	return strings.ReplaceAll(unescape(v), "+", " ")
}

// queryValue is the value of name in a raw query, without building the
// whole url.Values map; "" if name is absent or given more than once.
func queryValue(raw, name string) string {
	value, found := "", false
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		if k == name || (strings.ContainsAny(k, "%+") && unescape(k) == name) {
			if found {
				return ""
			}
			value, found = unescape(v), true
		}
	}
	return value
}

func unescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// keyOf builds a request's key from the rule's sources; ok is false if any
// part is missing.
//
// A part holding a control character counts as missing: parts are joined
// with one, and fallback keys start with one, so a client must not be able
// to forge them.
func keyOf(srcs []keySource, q *request) (key string, ok bool) {
	if len(srcs) == 1 {
		key = srcs[0].value(q)
		return key, key != "" && !hasControl(key)
	}
	var b strings.Builder
	for i, src := range srcs {
		v := src.value(q)
		if v == "" || hasControl(v) {
			return "", false
		}
		if i > 0 {
			b.WriteString(keySeparator)
		}
		b.WriteString(v)
	}
	return b.String(), true
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// hashedKey is a key as key_hash sha256 keeps it: the hex SHA-256 of it,
// what `printf %s KEY | sha256sum` prints.
func hashedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// shownKey is a key as the placeholder, logs and events show it: a
// fallback key (on_missing_key ip) as its address, without the NUL that
// keeps it apart from keys a client can send.
func shownKey(key string) string {
	return strings.TrimPrefix(key, "\x00")
}
