package jwtkey_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

// t0 is "now" in the tests; tokens expire an hour later unless said otherwise.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hmacSecret is a 32-byte HS256 secret.
var hmacSecret = []byte("0123456789abcdef0123456789abcdef")

// Keys made once per test binary with crypto/rand.
var (
	rsaKey    = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	rsaKey2   = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	p256Key   = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	p256Key2  = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	p384Key   = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)) })
	p521Key   = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P521(), rand.Reader)) })
	edPrivKey = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return must(k, err)
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// claims returns a claim set valid at t0: sub "alice", an hour left.
func claims(extra map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign returns a token of c signed with key by method, with header fields
// added (a nil value removes one).
func sign(t testing.TB, method jwt.SigningMethod, key any, c jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	for k, v := range header {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return s
}

// rawToken assembles a token from its JSON header and payload and a raw
// signature.
func rawToken(header, payload string, sig []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(sig)
}

func newVerifier(t testing.TB, cfg jwtkey.Config) *jwtkey.Verifier {
	t.Helper()
	v, err := jwtkey.NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// pemOf returns the PKIX "PUBLIC KEY" PEM of key.
func pemOf(t testing.TB, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// jwkOf returns the JWK members of a public key.
func jwkOf(key any) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := key.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		raw := must(k.Bytes()) // 04 || x || y
		return map[string]any{"kty": "EC", "crv": k.Curve.Params().Name, "x": b64(raw[1 : 1+size]), "y": b64(raw[1+size:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(k)}
	}
	panic("jwkOf: unexpected key type")
}

// jwks returns a JWK Set document of keys, each a jwkOf plus extra members.
func jwks(keys ...map[string]any) []byte {
	return must(json.Marshal(map[string]any{"keys": keys}))
}

// with returns m plus members.
func with(m map[string]any, kv ...string) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
