package jwtkey

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxTokenLength is the longest token Verify reads, in bytes. Longer tokens
// are refused with [ErrTooLarge] before any decoding. An RS256 token with a
// few claims is about 800 bytes.
const MaxTokenLength = 8 << 10

// DefaultLeeway is the clock skew allowed on "exp" and "nbf" when
// [Config.Leeway] is zero.
const DefaultLeeway = 30 * time.Second

// Config says which tokens a [Verifier] accepts.
//
// Each algorithm allowed needs a key of its type, and a token is checked only
// with keys of its algorithm's type: HS256, HS384 and HS512 with HMACSecret;
// RS256…RS512 and PS256…PS512 with RSA keys; ES256 with ECDSA P-256 keys,
// ES384 with P-384, ES512 with P-521; EdDSA with Ed25519 keys. So an HS256
// token "signed" with an RSA public key as HMAC secret never meets that key.
type Config struct {
	// HMACSecret is the shared secret of HS256, HS384 and HS512. It must be
	// at least as long as the hash: 32, 48 and 64 bytes (RFC 7518 §3.2).
	HMACSecret []byte

	// PublicKeys are keys without a key ID: *rsa.PublicKey (at least
	// MinRSABits bits), *ecdsa.PublicKey (P-256, P-384 or P-521) or
	// ed25519.PublicKey, as ParsePEM returns them. Each must fit one of the
	// allowed algorithms.
	PublicKeys []crypto.PublicKey

	// JWKS holds keys by key ID, from ParseJWKS. A token with a "kid" header
	// is checked with the keys of that ID, or if there are none with the keys
	// that have no ID (PublicKeys and JWKS keys without "kid"); a token
	// without "kid" with the keys that have no ID, or if there are none and
	// its algorithm has one key in all, with that key. A JWKS key with an "alg"
	// is used for that algorithm only. JWKS keys that fit none of the allowed
	// algorithms are ignored.
	JWKS *KeySet

	// Algorithms lists the "alg" values accepted, such as "RS256" or
	// "ES256". Required: there is no default. "none" is never accepted.
	Algorithms []string

	// Issuer, if set, must equal the token's "iss".
	Issuer string

	// Audience, if set, must be the token's "aud" or one of them.
	Audience string

	// Leeway is the clock skew allowed on "exp" and "nbf": a token is
	// accepted while now < exp+Leeway and now >= nbf−Leeway. Default (0):
	// DefaultLeeway. A negative value allows none.
	Leeway time.Duration

	// Unverified, if true, trusts tokens without checking their signature,
	// for when a layer in front (an API gateway, an auth module) has done
	// so. Tokens must still be well formed with an allowed "alg", and "exp",
	// "nbf", "iss" and "aud" are still checked. Keys must not be given.
	// Never set it when clients can reach this server directly: anyone
	// could then make up tokens, and so keys.
	Unverified bool

	// CacheSize is how many verified tokens are remembered, so that a
	// token seen again is not checked with its key again: checking an ES256
	// signature costs about 100µs, a hit well under 1µs. It is rounded up
	// to a power of two, at most 1<<20. Each token goes to one slot chosen
	// by its hash, replacing the token there, so size it above the number
	// of tokens in use at once. Memory: 8 bytes per slot, plus per token
	// its length and its decoded claims; an 860-byte token of 15 claims
	// takes 3.4 KiB (BenchmarkCacheMemory), so a full default cache of such
	// tokens about 14 MiB. Only verified tokens are cached, so only the
	// issuer can make entries larger. Default (0): DefaultCacheSize.
	// Negative: no cache. There is no cache when Unverified is set, as
	// anyone could then fill it with large tokens.
	CacheSize int
}

// A Verifier checks tokens against a [Config]. It is safe for concurrent use.
type Verifier struct {
	keys       map[string]*algKeys // by allowed algorithm
	parser     *jwt.Parser
	keyfunc    jwt.Keyfunc
	issuer     string
	audience   string
	leeway     int64 // nanoseconds
	unverified bool
	cache      *cache // nil if none
}

// algKeys holds the keys of one algorithm, each list ready to hand to the jwt
// parser: a single key, a jwt.VerificationKeySet, or nil if there is none.
type algKeys struct {
	// withoutKid is what a token without "kid" is checked with: the keys
	// without a key ID, or the only key there is (even with an ID), or
	// nothing. Never every key: a forged token must cost at most the keys
	// it could name, not one check a key (a JWKS may hold dozens).
	withoutKid any
	noKid      any            // keys without a key ID
	byKid      map[string]any // JWKS keys by key ID
}

type family uint8

const (
	_ family = iota
	hmacFamily
	rsaFamily
	ecFamily
	edFamily
)

// An algorithm is what a Verifier knows of one "alg" value.
type algorithm struct {
	family    family
	minSecret int    // HMAC: shortest secret, in bytes (RFC 7518 §3.2)
	curve     string // ECDSA: the curve's name
}

// algorithms are the "alg" values a Verifier knows.
var algorithms = map[string]algorithm{
	"HS256": {family: hmacFamily, minSecret: 32},
	"HS384": {family: hmacFamily, minSecret: 48},
	"HS512": {family: hmacFamily, minSecret: 64},
	"RS256": {family: rsaFamily}, "RS384": {family: rsaFamily}, "RS512": {family: rsaFamily},
	"PS256": {family: rsaFamily}, "PS384": {family: rsaFamily}, "PS512": {family: rsaFamily},
	"ES256": {family: ecFamily, curve: "P-256"},
	"ES384": {family: ecFamily, curve: "P-384"},
	"ES512": {family: ecFamily, curve: "P-521"},
	"EdDSA": {family: edFamily},
}

// needs names the key the algorithm signs with, for an error.
func (a algorithm) needs() string {
	switch a.family {
	case hmacFamily:
		return "an HMACSecret"
	case rsaFamily:
		return "an RSA key"
	case ecFamily:
		return "an ECDSA " + a.curve + " key"
	}
	return "an Ed25519 key"
}

// algFits reports whether alg signs with key.
func algFits(alg string, key crypto.PublicKey) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return algorithms[alg].family == rsaFamily
	case *ecdsa.PublicKey:
		return curveAlg(k.Curve) == alg
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// NewVerifier checks cfg and returns a Verifier for it. It fails when no
// algorithm is listed, one is unknown or "none", an algorithm has no key of
// its type, a key fits no allowed algorithm, a key is unusable (see
// [ParsePEM]) or an HMAC secret too short, or there are no keys at all unless
// Unverified is set (and then there must be none).
func NewVerifier(cfg Config) (*Verifier, error) {
	if len(cfg.Algorithms) == 0 {
		return nil, errors.New("no algorithm allowed: list them (RS256, ES256, …)")
	}
	hasKeys := len(cfg.HMACSecret) > 0 || len(cfg.PublicKeys) > 0 || cfg.JWKS.Len() > 0
	if cfg.Unverified && hasKeys {
		return nil, errors.New("keys given with Unverified: signatures are either checked or not")
	}
	if !cfg.Unverified && !hasKeys {
		return nil, errors.New("no keys: give HMACSecret, PublicKeys or JWKS (or set Unverified if a layer in front verifies tokens)")
	}
	for i, k := range cfg.PublicKeys {
		if err := checkPublicKey(k); err != nil {
			return nil, fmt.Errorf("public key %d: %v", i, err)
		}
	}
	v := &Verifier{
		keys:       make(map[string]*algKeys),
		issuer:     cfg.Issuer,
		audience:   cfg.Audience,
		leeway:     int64(cfg.Leeway),
		unverified: cfg.Unverified,
	}
	secret := bytes.Clone(cfg.HMACSecret) // the caller's slice may change later
	var algs []string
	hmacUsed := false
	for _, alg := range cfg.Algorithms {
		if strings.EqualFold(alg, "none") {
			return nil, errors.New(`algorithm "none" is never allowed`)
		}
		spec, ok := algorithms[alg]
		if !ok {
			return nil, fmt.Errorf("unknown algorithm %q (want HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA)", alg)
		}
		if v.keys[alg] != nil {
			continue
		}
		var all, noKid []jwt.VerificationKey
		byKid := make(map[string][]jwt.VerificationKey)
		if spec.family == hmacFamily && len(cfg.HMACSecret) > 0 {
			if len(cfg.HMACSecret) < spec.minSecret {
				return nil, fmt.Errorf("%s needs an HMACSecret of at least %d bytes (RFC 7518 §3.2), not %d", alg, spec.minSecret, len(cfg.HMACSecret))
			}
			all = append(all, secret)
			noKid = append(noKid, secret)
			hmacUsed = true
		}
		for _, k := range cfg.PublicKeys {
			if algFits(alg, k) {
				all = append(all, k)
				noKid = append(noKid, k)
			}
		}
		if cfg.JWKS != nil {
			for _, k := range cfg.JWKS.keys {
				if (k.alg == "" || k.alg == alg) && algFits(alg, k.key) {
					all = append(all, k.key)
					if k.kid == "" {
						noKid = append(noKid, k.key)
					} else {
						byKid[k.kid] = append(byKid[k.kid], k.key)
					}
				}
			}
		}
		if !cfg.Unverified && len(all) == 0 {
			return nil, fmt.Errorf("algorithm %s has no key: it needs %s", alg, spec.needs())
		}
		ak := &algKeys{noKid: keyArg(noKid), byKid: make(map[string]any, len(byKid))}
		ak.withoutKid = ak.noKid
		if len(noKid) == 0 && len(all) == 1 {
			ak.withoutKid = all[0]
		}
		for kid, keys := range byKid {
			ak.byKid[kid] = keyArg(keys)
		}
		v.keys[alg] = ak
		algs = append(algs, alg)
	}
	if len(cfg.HMACSecret) > 0 && !hmacUsed {
		return nil, errors.New("HMACSecret given but none of HS256, HS384, HS512 allowed")
	}
	for i, k := range cfg.PublicKeys {
		used := false
		for _, alg := range algs {
			used = used || algFits(alg, k)
		}
		if !used {
			return nil, fmt.Errorf("public key %d (%T) fits none of the allowed algorithms %v", i, k, algs)
		}
	}
	switch {
	case v.leeway == 0:
		v.leeway = int64(DefaultLeeway)
	case v.leeway < 0:
		v.leeway = 0
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithJSONNumber(),
		jwt.WithStrictDecoding(),
		jwt.WithoutClaimsValidation(), // checkClaims does it, against the time given to Verify
	)
	v.keyfunc = v.keyFor
	if !cfg.Unverified && cfg.CacheSize >= 0 {
		v.cache = newCache(cfg.CacheSize)
	}
	return v, nil
}

// keyArg returns keys as the jwt parser takes them.
func keyArg(keys []jwt.VerificationKey) any {
	switch len(keys) {
	case 0:
		return nil
	case 1:
		return keys[0]
	}
	return jwt.VerificationKeySet{Keys: keys}
}

// Verify checks token (the compact form, "header.payload.signature") at time
// now and returns its claims. Its error wraps one of ErrTooLarge,
// ErrMalformed, ErrAlgorithm, ErrUnknownKey, ErrSignature, ErrExpired,
// ErrNotYetValid, ErrIssuer or ErrAudience; [Reason] names it.
//
// now must lie between the years 1678 and 2261 (time.Time.UnixNano).
func (v *Verifier) Verify(token string, now time.Time) (Claims, error) {
	if len(token) > MaxTokenLength {
		return Claims{}, refuse(ErrTooLarge, "%d bytes, at most %d", len(token), MaxTokenLength)
	}
	nowNs := now.UnixNano()
	if v.cache != nil {
		if c, ok := v.cache.get(token, nowNs, v.leeway); ok {
			return c, nil
		}
	}
	claims := jwt.MapClaims{}
	var t *jwt.Token
	var err error
	if v.unverified {
		if t, _, err = v.parser.ParseUnverified(token, claims); err == nil {
			_, err = v.checkHeader(t)
		}
	} else {
		t, err = v.parser.ParseWithClaims(token, claims, v.keyfunc)
	}
	if err != nil {
		return Claims{}, v.classify(t, err)
	}
	w, err := v.checkClaims(claims, nowNs)
	if err != nil {
		return Claims{}, err
	}
	c := Claims{m: claims}
	if v.cache != nil {
		v.cache.put(token, c, w)
	}
	return c, nil
}

// checkHeader checks the header of a parsed token and returns the keys of its
// algorithm.
func (v *Verifier) checkHeader(t *jwt.Token) (*algKeys, error) {
	alg := t.Method.Alg()
	ak := v.keys[alg]
	if ak == nil {
		return nil, refuse(ErrAlgorithm, "%.20q", alg)
	}
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 §4.1.11: extensions not understood must be refused.
		return nil, refuse(ErrMalformed, `"crit" header: no extension is supported`)
	}
	return ak, nil
}

// keyFor is the jwt.Keyfunc: it returns the keys that may have signed t.
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	ak, err := v.checkHeader(t)
	if err != nil {
		return nil, err
	}
	keys := ak.withoutKid
	if h, ok := t.Header["kid"]; ok {
		kid, ok := h.(string)
		if !ok {
			return nil, refuse(ErrMalformed, `"kid" header is not a string`)
		}
		if keys = ak.byKid[kid]; keys == nil {
			keys = ak.noKid
		}
		if keys == nil {
			return nil, refuse(ErrUnknownKey, "no %s key with kid %.64q", t.Method.Alg(), kid)
		}
	}
	if keys == nil { // every key has a kid, and there are several
		return nil, refuse(ErrUnknownKey, "no %s key for a token without kid (every key has one)", t.Method.Alg())
	}
	return keys, nil
}

// classify turns an error of the jwt parser into one that wraps a reason.
func (v *Verifier) classify(t *jwt.Token, err error) error {
	if Reason(err) != "other" { // from checkHeader or keyFor
		return err
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refuse(ErrMalformed, "%v", err)
	case t == nil || t.Method == nil: // "alg" missing, not a string, or unknown
		return refuse(ErrAlgorithm, "%v", err)
	case v.keys[t.Method.Alg()] == nil: // refused by jwt.WithValidMethods
		return refuse(ErrAlgorithm, "%.20q", t.Method.Alg())
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(ErrSignature, "%v", err)
	}
	return refuse(ErrMalformed, "%v", err)
}

// window is when a token may be used: exp and nbf in Unix nanoseconds, or
// math.MaxInt64 and math.MinInt64 when the token has none.
type window struct {
	exp, nbf int64
}

// check reports whether now (Unix nanoseconds) lies in w, give or take leeway.
func (w window) check(now, leeway int64) error {
	if now >= addSat(w.exp, leeway) {
		return refuse(ErrExpired, "exp %s is before now %s minus leeway %s", unixString(w.exp), unixString(now), time.Duration(leeway))
	}
	if now < addSat(w.nbf, -leeway) {
		return refuse(ErrNotYetValid, "nbf %s is after now %s plus leeway %s", unixString(w.nbf), unixString(now), time.Duration(leeway))
	}
	return nil
}

func unixString(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// addSat returns a+b, saturated to the int64 range.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// checkClaims checks exp, nbf, iss and aud, and returns the token's window.
func (v *Verifier) checkClaims(m map[string]any, now int64) (window, error) {
	w := window{exp: math.MaxInt64, nbf: math.MinInt64}
	var ok bool
	if x, has := m["exp"]; has {
		if w.exp, ok = numericDate(x); !ok {
			return w, refuse(ErrMalformed, `"exp" is not a number`)
		}
	}
	if x, has := m["nbf"]; has {
		if w.nbf, ok = numericDate(x); !ok {
			return w, refuse(ErrMalformed, `"nbf" is not a number`)
		}
	}
	if err := w.check(now, v.leeway); err != nil {
		return w, err
	}
	if v.issuer != "" {
		if iss, _ := m["iss"].(string); iss != v.issuer {
			return w, refuse(ErrIssuer, "iss %.64q, want %q", iss, v.issuer)
		}
	}
	if v.audience != "" {
		found := false
		switch aud := m["aud"].(type) {
		case string:
			found = aud == v.audience
		case []any:
			for _, a := range aud {
				if s, _ := a.(string); s == v.audience {
					found = true
					break
				}
			}
		}
		if !found {
			return w, refuse(ErrAudience, "%q is not in aud", v.audience)
		}
	}
	return w, nil
}

// numericDate returns a NumericDate claim (seconds since 1970, RFC 7519 §2)
// in Unix nanoseconds, saturated beyond ±9e9 seconds (about the year 2255), or
// false if it is not a number.
func numericDate(x any) (int64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range gives ±Inf or ±0
		return 0, false
	}
	const limit = 9e9
	switch {
	case f >= limit:
		return math.MaxInt64, true
	case f <= -limit:
		return math.MinInt64, true
	}
	sec := math.Trunc(f)
	return int64(sec)*1e9 + int64(math.Round((f-sec)*1e9)), true
}
