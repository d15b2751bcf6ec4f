package jwtkey_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

// wantReason checks that err is refused for reason, and wraps its sentinel.
func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	if got := jwtkey.Reason(err); got != reason {
		t.Fatalf("Reason(%v) = %q, want %q", err, got, reason)
	}
}

func TestVerifyValidTokens(t *testing.T) {
	for i, tc := range []struct {
		alg    string
		method jwt.SigningMethod
		sign   any
		cfg    jwtkey.Config
	}{
		{"HS256", jwt.SigningMethodHS256, hmacSecret, jwtkey.Config{HMACSecret: hmacSecret}},
		{"HS512", jwt.SigningMethodHS512, []byte(strings.Repeat("k", 64)), jwtkey.Config{HMACSecret: []byte(strings.Repeat("k", 64))}},
		{"RS256", jwt.SigningMethodRS256, rsaKey(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&rsaKey().PublicKey}}},
		{"RS512", jwt.SigningMethodRS512, rsaKey(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&rsaKey().PublicKey}}},
		{"PS256", jwt.SigningMethodPS256, rsaKey(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&rsaKey().PublicKey}}},
		{"ES256", jwt.SigningMethodES256, p256Key(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}}},
		{"ES384", jwt.SigningMethodES384, p384Key(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&p384Key().PublicKey}}},
		{"ES512", jwt.SigningMethodES512, p521Key(), jwtkey.Config{PublicKeys: []crypto.PublicKey{&p521Key().PublicKey}}},
		{"EdDSA", jwt.SigningMethodEdDSA, edPrivKey(), jwtkey.Config{PublicKeys: []crypto.PublicKey{edPrivKey().Public()}}},
	} {
		tc.cfg.Algorithms = []string{tc.alg}
		v := newVerifier(t, tc.cfg)
		tok := sign(t, tc.method, tc.sign, claims(map[string]any{"tenant": map[string]any{"id": "acme"}}), nil)
		c, err := v.Verify(tok, t0)
		if err != nil {
			t.Fatalf("Test %d (%s): Verify: %v", i, tc.alg, err)
		}
		if got, ok := c.Get("sub"); got != "alice" || !ok {
			t.Errorf("Test %d (%s): Get(sub) = %q, %v; want alice, true", i, tc.alg, got, ok)
		}
		if got, ok := c.Get("tenant.id"); got != "acme" || !ok {
			t.Errorf("Test %d (%s): Get(tenant.id) = %q, %v; want acme, true", i, tc.alg, got, ok)
		}
		if err := jwtkey.Reason(err); err != "" {
			t.Errorf("Test %d: Reason(nil) = %q", i, err)
		}
	}
}

func TestVerifyBadSignature(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"ES256", "HS256"}, HMACSecret: hmacSecret,
		PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}})
	good := sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), nil)
	hs := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(nil), nil)
	dot := strings.LastIndexByte(good, '.')
	for i, tok := range []string{
		sign(t, jwt.SigningMethodES256, p256Key2(), claims(nil), nil),                                        // another key
		sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), claims(nil), nil),                   // another secret
		good[:dot+1] + flip(good[dot+1:], 10),                                                                // signature changed
		withSig(sign(t, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"sub": "bob"}), nil), good), // payload swapped
		hs[:strings.LastIndexByte(hs, '.')+1],                                                                // signature removed
	} {
		_, err := v.Verify(tok, t0)
		wantReason(t, err, "signature")
		if !errors.Is(err, jwtkey.ErrSignature) {
			t.Errorf("Test %d: %v does not wrap ErrSignature", i, err)
		}
	}
}

// withSig returns tok with the signature of other.
func withSig(tok, other string) string {
	return tok[:strings.LastIndexByte(tok, '.')] + other[strings.LastIndexByte(other, '.'):]
}

// flip changes the base64url character at i of s into another one.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestVerifyAlgNoneRefused(t *testing.T) {
	payload := `{"sub":"alice"}`
	unsigned := rawToken(`{"alg":"none","typ":"JWT"}`, payload, nil)
	libNone := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil), nil)
	for i, cfg := range []jwtkey.Config{
		{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret},
		{Algorithms: []string{"RS256"}, PublicKeys: []crypto.PublicKey{&rsaKey().PublicKey}},
		{Algorithms: []string{"HS256", "RS256", "ES256"}, Unverified: true},
	} {
		v := newVerifier(t, cfg)
		for j, tok := range []string{unsigned, libNone, rawToken(`{"alg":"NONE"}`, payload, nil), rawToken(`{"alg":"None"}`, payload, nil)} {
			_, err := v.Verify(tok, t0)
			if jwtkey.Reason(err) != "algorithm" {
				t.Errorf("Test %d.%d: Verify(alg none) = %v, want an algorithm error", i, j, err)
			}
		}
	}
	for i, algs := range [][]string{{"none"}, {"HS256", "None"}} {
		_, err := jwtkey.NewVerifier(jwtkey.Config{Algorithms: algs, HMACSecret: hmacSecret})
		if err == nil || err.Error() != `algorithm "none" is never allowed` {
			t.Errorf("Test %d: NewVerifier(%v) = %v", i, algs, err)
		}
	}
}

func TestVerifyAlgorithmConfusion(t *testing.T) {
	rsaPub := &rsaKey().PublicKey
	pubPEM := pemOf(t, rsaPub)
	forged := sign(t, jwt.SigningMethodHS256, pubPEM, claims(nil), nil)

	// An RS256 verifier never takes an HS256 token, whatever its secret.
	rs := newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256"}, PublicKeys: []crypto.PublicKey{rsaPub}})
	_, err := rs.Verify(forged, t0)
	wantReason(t, err, "algorithm")

	// With HS256 allowed too, the RSA key is still never used as an HMAC secret.
	both := newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256", "HS256"}, PublicKeys: []crypto.PublicKey{rsaPub}, HMACSecret: hmacSecret})
	_, err = both.Verify(forged, t0)
	wantReason(t, err, "signature")
	der := pubPEM[strings.Index(string(pubPEM), "\n")+1:]
	_, err = both.Verify(sign(t, jwt.SigningMethodHS256, der, claims(nil), nil), t0)
	wantReason(t, err, "signature")

	// An ES256 verifier refuses ES384 tokens.
	es := newVerifier(t, jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}})
	_, err = es.Verify(sign(t, jwt.SigningMethodES384, p384Key(), claims(nil), nil), t0)
	wantReason(t, err, "algorithm")

	// With ES256 and ES384 allowed, an "ES384" token signed by the P-256 key
	// (SHA-384 digest, 48-byte r and s) is not checked with the P-256 key,
	// which would accept it.
	es2 := newVerifier(t, jwtkey.Config{Algorithms: []string{"ES256", "ES384"},
		PublicKeys: []crypto.PublicKey{&p256Key().PublicKey, &p384Key().PublicKey}})
	header, payload := `{"alg":"ES384","typ":"JWT"}`, `{"sub":"mallory"}`
	unsignedTok := rawToken(header, payload, nil)
	input := unsignedTok[:len(unsignedTok)-1]
	digest := sha512.Sum384([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, p256Key(), digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.Verify(&p256Key().PublicKey, digest[:], r, s) {
		t.Fatal("the forgery does not even verify with the P-256 key")
	}
	sig := make([]byte, 96)
	r.FillBytes(sig[:48])
	s.FillBytes(sig[48:])
	_, err = es2.Verify(rawToken(header, payload, sig), t0)
	wantReason(t, err, "signature")

	// An Ed25519 verifier refuses an HS256 token made with the Ed25519 key's bytes.
	ed := newVerifier(t, jwtkey.Config{Algorithms: []string{"EdDSA"}, PublicKeys: []crypto.PublicKey{edPrivKey().Public()}})
	_, err = ed.Verify(sign(t, jwt.SigningMethodHS256, []byte(edPrivKey().Public().(ed25519.PublicKey)), claims(nil), nil), t0)
	wantReason(t, err, "algorithm")
}

func TestVerifyTime(t *testing.T) {
	exp := t0.Add(time.Hour)
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, CacheSize: -1})
	tok := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{"exp": exp.Unix()}), nil)
	for i, tc := range []struct {
		now    time.Time
		reason string
	}{
		{t0, ""},
		{exp, ""}, // leeway: still valid at exp
		{exp.Add(jwtkey.DefaultLeeway - time.Nanosecond), ""},
		{exp.Add(jwtkey.DefaultLeeway), "expired"},
		{exp.Add(24 * time.Hour), "expired"},
	} {
		_, err := v.Verify(tok, tc.now)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: at exp%+v: Reason(%v) = %q, want %q", i, tc.now.Sub(exp), err, got, tc.reason)
		}
	}

	nbf := t0.Add(time.Minute)
	early := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{"nbf": nbf.Unix()}), nil)
	for i, tc := range []struct {
		now    time.Time
		reason string
	}{
		{t0, "not_yet_valid"},
		{nbf.Add(-jwtkey.DefaultLeeway - time.Nanosecond), "not_yet_valid"},
		{nbf.Add(-jwtkey.DefaultLeeway), ""},
		{nbf, ""},
	} {
		_, err := v.Verify(early, tc.now)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: at nbf%+v: Reason(%v) = %q, want %q", i, tc.now.Sub(nbf), err, got, tc.reason)
		}
	}
}

func TestVerifyLeewayConfig(t *testing.T) {
	exp := t0.Add(time.Hour)
	for i, tc := range []struct {
		leeway time.Duration
		valid  time.Time // last valid instant
	}{
		{0, exp.Add(jwtkey.DefaultLeeway - time.Nanosecond)},
		{5 * time.Second, exp.Add(5*time.Second - time.Nanosecond)},
		{-1, exp.Add(-time.Nanosecond)},
	} {
		v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, Leeway: tc.leeway})
		tok := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{"exp": exp.Unix()}), nil)
		if _, err := v.Verify(tok, tc.valid); err != nil {
			t.Errorf("Test %d: Verify at the last valid instant: %v", i, err)
		}
		_, err := v.Verify(tok, tc.valid.Add(time.Nanosecond))
		if jwtkey.Reason(err) != "expired" {
			t.Errorf("Test %d: Verify a nanosecond later: %v, want expired", i, err)
		}
	}
}

func TestVerifyNumericDates(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, Leeway: -1})
	for i, tc := range []struct {
		claims map[string]any
		reason string
	}{
		{map[string]any{"exp": nil}, ""}, // no exp: accepted
		{map[string]any{"exp": json.Number("1e400")}, ""},
		{map[string]any{"exp": json.Number("-1e400")}, "expired"},
		{map[string]any{"exp": json.Number("0")}, "expired"},
		{map[string]any{"exp": float64(t0.Unix()) + 0.5}, ""},
		{map[string]any{"exp": t0.Unix()}, "expired"},
		{map[string]any{"exp": "tomorrow"}, "malformed"},
		{map[string]any{"exp": true}, "malformed"},
		{map[string]any{"nbf": json.Number("1e400")}, "not_yet_valid"},
		{map[string]any{"nbf": json.Number("-1e400")}, ""},
		{map[string]any{"nbf": []any{1}}, "malformed"},
		{map[string]any{"iat": t0.Add(time.Hour).Unix()}, ""}, // iat is not checked
	} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, hmacSecret, claims(tc.claims), nil), t0)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: claims %v: Reason(%v) = %q, want %q", i, tc.claims, err, got, tc.reason)
		}
	}
	// exp null is present but not a number.
	_, err := v.Verify(rawTokenHS(`{"sub":"alice","exp":null}`), t0)
	wantReason(t, err, "malformed")
}

// rawTokenHS signs a raw JSON payload with hmacSecret.
func rawTokenHS(payload string) string {
	unsigned := rawToken(`{"alg":"HS256","typ":"JWT"}`, payload, nil)
	input := unsigned[:len(unsigned)-1]
	sig, _ := jwt.SigningMethodHS256.Sign(input, hmacSecret)
	return rawToken(`{"alg":"HS256","typ":"JWT"}`, payload, sig)
}

func TestVerifyIssuerAudience(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret,
		Issuer: "https://id.example.com/", Audience: "api"})
	for i, tc := range []struct {
		claims map[string]any
		reason string
	}{
		{map[string]any{"iss": "https://id.example.com/", "aud": "api"}, ""},
		{map[string]any{"iss": "https://id.example.com/", "aud": []any{"web", "api"}}, ""},
		{map[string]any{"iss": "https://id.example.com", "aud": "api"}, "issuer"},
		{map[string]any{"aud": "api"}, "issuer"},
		{map[string]any{"iss": 7, "aud": "api"}, "issuer"},
		{map[string]any{"iss": "https://id.example.com/", "aud": "web"}, "audience"},
		{map[string]any{"iss": "https://id.example.com/", "aud": []any{"web", 1}}, "audience"},
		{map[string]any{"iss": "https://id.example.com/"}, "audience"},
		{map[string]any{"iss": "https://id.example.com/", "aud": []any{}}, "audience"},
	} {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, hmacSecret, claims(tc.claims), nil), t0)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: claims %v: Reason(%v) = %q, want %q", i, tc.claims, err, got, tc.reason)
		}
	}
	// Without Issuer and Audience configured, neither is looked at.
	open := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret})
	if _, err := open.Verify(sign(t, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{"iss": 1, "aud": 2}), nil), t0); err != nil {
		t.Errorf("Verify without Issuer or Audience: %v", err)
	}
}

func TestVerifyMalformed(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret})
	good := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(nil), nil)
	parts := strings.Split(good, ".")
	for i, tc := range []struct {
		token, reason string
	}{
		{"", "malformed"},
		{"abc", "malformed"},
		{"a.b", "malformed"},
		{good + ".x", "malformed"},
		{good + ".x.y", "malformed"},                      // JWE-like, five segments
		{"!!!." + parts[1] + "." + parts[2], "malformed"}, // not base64url
		{parts[0] + "=." + parts[1] + "." + parts[2], "malformed"},
		{strings.Replace(good, "-", "+", 1), "malformed"},
		{rawToken(`not json`, `{}`, []byte("x")), "malformed"},
		{rawToken(`{"alg":"HS256"}`, `not json`, []byte("x")), "malformed"},
		{rawToken(`{"alg":"HS256"}`, `[1]`, []byte("x")), "malformed"},
		{rawToken(`{"typ":"JWT"}`, `{}`, []byte("x")), "algorithm"},
		{rawToken(`{"alg":1}`, `{}`, []byte("x")), "algorithm"},
		{rawToken(`{"alg":"HS999"}`, `{}`, []byte("x")), "algorithm"},
		{rawToken(`{"alg":"RS256"}`, `{}`, []byte("x")), "algorithm"},
		{sign(t, jwt.SigningMethodHS256, hmacSecret, claims(nil), map[string]any{"kid": 5}), "malformed"},
		{sign(t, jwt.SigningMethodHS256, hmacSecret, claims(nil), map[string]any{"crit": []string{"exp"}}), "malformed"},
		{strings.Repeat("a", jwtkey.MaxTokenLength+1), "too_large"},
		{good + strings.Repeat("A", jwtkey.MaxTokenLength), "too_large"},
	} {
		_, err := v.Verify(tc.token, t0)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: Verify(%.40q): Reason(%v) = %q, want %q", i, tc.token, err, got, tc.reason)
		}
	}
}

func TestVerifyMaxTokenLength(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret})
	// The longest token of at most MaxTokenLength bytes is accepted.
	var tok string
	for n := 6000; ; n++ {
		next := sign(t, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{"pad": strings.Repeat("p", n)}), nil)
		if len(next) > jwtkey.MaxTokenLength {
			break
		}
		tok = next
	}
	if len(tok) < jwtkey.MaxTokenLength-3 {
		t.Fatalf("token of %d bytes, want about %d", len(tok), jwtkey.MaxTokenLength)
	}
	if _, err := v.Verify(tok, t0); err != nil {
		t.Errorf("Verify(%d bytes): %v", len(tok), err)
	}
	_, err := v.Verify(tok+strings.Repeat("A", jwtkey.MaxTokenLength+1-len(tok)), t0)
	if err == nil || err.Error() != "token too large: 8193 bytes, at most 8192" {
		t.Errorf("Verify(8193 bytes) = %v", err)
	}
}

func TestVerifyUnverified(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256"}, Unverified: true, Issuer: "idp", Audience: "api"})
	ok := claims(map[string]any{"iss": "idp", "aud": "api"})
	// Any signature will do, even one by another key.
	c, err := v.Verify(sign(t, jwt.SigningMethodRS256, rsaKey2(), ok, nil), t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if sub, _ := c.Get("sub"); sub != "alice" {
		t.Errorf("Get(sub) = %q", sub)
	}
	for i, tc := range []struct {
		token, reason string
	}{
		{rawToken(`{"alg":"RS256"}`, `{"iss":"idp","aud":"api"}`, nil), ""},
		{rawToken(`{"alg":"RS256"}`, `{"iss":"idp","aud":"api"}`, []byte("junk")), ""},
		{"a.b", "malformed"},
		{rawToken(`{"alg":"RS256"}`, `nope`, nil), "malformed"},
		{rawToken(`{"alg":"RS256"}`, `{"iss":"idp","aud":"api"}`, nil) + "!", "malformed"},
		{rawToken(`{"alg":"none"}`, `{"iss":"idp","aud":"api"}`, nil), "algorithm"},
		{rawToken(`{"alg":"HS256"}`, `{"iss":"idp","aud":"api"}`, nil), "algorithm"},
		{rawToken(`{"alg":"RS256","crit":["b64"]}`, `{"iss":"idp","aud":"api"}`, nil), "malformed"},
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(map[string]any{"iss": "idp", "aud": "api", "exp": t0.Add(-time.Hour).Unix()}), nil), "expired"},
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(map[string]any{"iss": "idp", "aud": "api", "nbf": t0.Add(time.Hour).Unix()}), nil), "not_yet_valid"},
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(map[string]any{"iss": "other", "aud": "api"}), nil), "issuer"},
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(map[string]any{"iss": "idp", "aud": "web"}), nil), "audience"},
		{strings.Repeat("a", jwtkey.MaxTokenLength+1), "too_large"},
	} {
		_, err := v.Verify(tc.token, t0)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: Reason(%v) = %q, want %q", i, err, got, tc.reason)
		}
	}
	if n := v.CacheSlots(); n != 0 {
		t.Errorf("Unverified verifier has a cache of %d slots, want none", n)
	}
}

func TestVerifyJWKS(t *testing.T) {
	set, err := jwtkey.ParseJWKS(jwks(
		with(jwkOf(&rsaKey().PublicKey), "kid", "a", "alg", "RS256"),
		with(jwkOf(&rsaKey2().PublicKey), "kid", "b"),
		with(jwkOf(&p256Key().PublicKey), "kid", "b"), // same kid, other type
		jwkOf(&p256Key2().PublicKey),                  // no kid
	))
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256", "PS256", "ES256"}, JWKS: set})
	kid := func(k string) map[string]any { return map[string]any{"kid": k} }
	for i, tc := range []struct {
		token, reason string
	}{
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), kid("a")), ""},
		{sign(t, jwt.SigningMethodRS256, rsaKey2(), claims(nil), kid("b")), ""},
		{sign(t, jwt.SigningMethodPS256, rsaKey2(), claims(nil), kid("b")), ""},
		{sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), kid("b")), ""},
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), nil), "unknown_key"},     // no kid, and every RS256 key has one: none is tried
		{sign(t, jwt.SigningMethodES256, p256Key2(), claims(nil), nil), ""},              // no kid
		{sign(t, jwt.SigningMethodES256, p256Key2(), claims(nil), kid("zzz")), ""},       // unknown kid: keys without kid
		{sign(t, jwt.SigningMethodRS256, rsaKey2(), claims(nil), kid("a")), "signature"}, // kid a is another key
		{sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), kid("zzz")), "unknown_key"},
		{sign(t, jwt.SigningMethodPS256, rsaKey(), claims(nil), kid("a")), "unknown_key"}, // key a is for RS256 only
		{sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), kid("a")), "signature"},  // kid a has no ES256 key: keys without kid tried
	} {
		_, err := v.Verify(tc.token, t0)
		if got := jwtkey.Reason(err); got != tc.reason {
			t.Errorf("Test %d: Reason(%v) = %q, want %q", i, err, got, tc.reason)
		}
	}
	_, err = v.Verify(sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), kid("zzz")), t0)
	if !errors.Is(err, jwtkey.ErrUnknownKey) || !strings.HasSuffix(err.Error(), `no key for token: no RS256 key with kid "zzz"`) {
		t.Errorf("unknown kid: %v", err)
	}
}

// A token without kid is checked with the keys without one, or with the
// only key of its algorithm; never with every key, so that a forged token
// costs at most one signature check however many keys a JWKS holds.
func TestVerifyWithoutKid(t *testing.T) {
	one, err := jwtkey.ParseJWKS(jwks(with(jwkOf(&rsaKey().PublicKey), "kid", "only")))
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256"}, JWKS: one})
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), nil), t0); err != nil {
		t.Errorf("one key with a kid, a token without: %v", err)
	}
	if got := reasonOf(v, sign(t, jwt.SigningMethodRS256, rsaKey2(), claims(nil), nil)); got != "signature" {
		t.Errorf("one key, a forged token without kid: reason %q, want signature", got)
	}

	both, err := jwtkey.ParseJWKS(jwks(with(jwkOf(&rsaKey().PublicKey), "kid", "a"), jwkOf(&rsaKey2().PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	v = newVerifier(t, jwtkey.Config{Algorithms: []string{"RS256"}, JWKS: both})
	if got := reasonOf(v, sign(t, jwt.SigningMethodRS256, rsaKey(), claims(nil), nil)); got != "signature" {
		t.Errorf("a token without kid signed by the key with kid a: reason %q, want signature (only the key without kid is tried)", got)
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, rsaKey2(), claims(nil), nil), t0); err != nil {
		t.Errorf("a token without kid signed by the key without one: %v", err)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	rsaPub, p256, p384 := &rsaKey().PublicKey, &p256Key().PublicKey, &p384Key().PublicKey
	onlyEnc, err := jwtkey.ParseJWKS(jwks(with(jwkOf(p384), "kid", "x")))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		cfg  jwtkey.Config
		want string
	}{
		{jwtkey.Config{HMACSecret: hmacSecret}, "no algorithm allowed: list them (RS256, ES256, …)"},
		{jwtkey.Config{Algorithms: []string{"HS256"}}, "no keys: give HMACSecret, PublicKeys or JWKS (or set Unverified if a layer in front verifies tokens)"},
		{jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, Unverified: true}, "keys given with Unverified: signatures are either checked or not"},
		{jwtkey.Config{Algorithms: []string{"none"}, Unverified: true}, `algorithm "none" is never allowed`},
		{jwtkey.Config{Algorithms: []string{"rs256"}, PublicKeys: []crypto.PublicKey{rsaPub}}, `unknown algorithm "rs256" (want HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA)`},
		{jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: []byte("short")}, "HS256 needs an HMACSecret of at least 32 bytes (RFC 7518 §3.2), not 5"},
		{jwtkey.Config{Algorithms: []string{"HS512"}, HMACSecret: hmacSecret}, "HS512 needs an HMACSecret of at least 64 bytes (RFC 7518 §3.2), not 32"},
		{jwtkey.Config{Algorithms: []string{"RS256"}, HMACSecret: hmacSecret}, "algorithm RS256 has no key: it needs an RSA key"},
		{jwtkey.Config{Algorithms: []string{"RS256", "HS256"}, HMACSecret: hmacSecret}, "algorithm RS256 has no key: it needs an RSA key"},
		{jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{p384}}, "algorithm ES256 has no key: it needs an ECDSA P-256 key"},
		{jwtkey.Config{Algorithms: []string{"EdDSA", "ES384"}, PublicKeys: []crypto.PublicKey{p384}}, "algorithm EdDSA has no key: it needs an Ed25519 key"},
		{jwtkey.Config{Algorithms: []string{"HS256"}, JWKS: onlyEnc}, "algorithm HS256 has no key: it needs an HMACSecret"},
		{jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{p256}, HMACSecret: hmacSecret}, "HMACSecret given but none of HS256, HS384, HS512 allowed"},
		{jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{p256, rsaPub}}, "public key 1 (*rsa.PublicKey) fits none of the allowed algorithms [ES256]"},
		{jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{p256, p384}}, "public key 1 (*ecdsa.PublicKey) fits none of the allowed algorithms [ES256]"},
		{jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{p256Key()}}, "public key 0: unsupported key type *ecdsa.PrivateKey (want RSA, ECDSA or Ed25519 public key)"},
		{jwtkey.Config{Algorithms: []string{"HS256"}, PublicKeys: []crypto.PublicKey{hmacSecret}}, "public key 0: unsupported key type []uint8 (want RSA, ECDSA or Ed25519 public key)"},
		{jwtkey.Config{Algorithms: []string{"RS256"}, PublicKeys: []crypto.PublicKey{(*ecdsa.PublicKey)(nil)}}, "public key 0: empty ECDSA key"},
	} {
		v, err := jwtkey.NewVerifier(tc.cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: NewVerifier = %v, %v; want error %q", i, v, err, tc.want)
		}
	}
	// Keys of a JWK Set that fit no allowed algorithm are fine (a set holds many).
	newVerifier(t, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, JWKS: onlyEnc})
}

func TestReason(t *testing.T) {
	for i, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("boom"), "other"},
		{jwtkey.ErrTooLarge, "too_large"},
		{jwtkey.ErrMalformed, "malformed"},
		{jwtkey.ErrAlgorithm, "algorithm"},
		{jwtkey.ErrUnknownKey, "unknown_key"},
		{jwtkey.ErrSignature, "signature"},
		{jwtkey.ErrExpired, "expired"},
		{jwtkey.ErrNotYetValid, "not_yet_valid"},
		{jwtkey.ErrIssuer, "issuer"},
		{jwtkey.ErrAudience, "audience"},
	} {
		if got := jwtkey.Reason(tc.err); got != tc.want {
			t.Errorf("Test %d: Reason(%v) = %q, want %q", i, tc.err, got, tc.want)
		}
	}
	want := "[too_large malformed algorithm unknown_key signature expired not_yet_valid issuer audience other]"
	if got := fmt.Sprint(jwtkey.Reasons()); got != want {
		t.Errorf("Reasons() = %s, want %s", got, want)
	}
}

func TestVerifyConcurrent(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}, CacheSize: 4})
	var toks []string
	for i := range 8 {
		toks = append(toks, sign(t, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"sub": string(rune('a' + i))}), nil))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for j := range 50 {
				k := (g + j) % len(toks)
				c, err := v.Verify(toks[k], t0)
				if err != nil {
					t.Error(err)
					return
				}
				if sub, _ := c.Get("sub"); sub != string(rune('a'+k)) {
					t.Errorf("token %d: sub %q", k, sub)
					return
				}
			}
		})
	}
	wg.Wait()
}

// reasonOf is the reason v refuses token at t0, "" if it does not.
func reasonOf(v *jwtkey.Verifier, token string) string {
	_, err := v.Verify(token, t0)
	return jwtkey.Reason(err)
}
