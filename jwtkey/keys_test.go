package jwtkey_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/edgebyte/edgelimit/jwtkey"
)

func TestParsePEM(t *testing.T) {
	rsaPub, p256, p384, p521 := &rsaKey().PublicKey, &p256Key().PublicKey, &p384Key().PublicKey, &p521Key().PublicKey
	edPub := edPrivKey().Public().(ed25519.PublicKey)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(rsaPub)})
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idp"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(-time.Minute)} // expired: its dates are not looked at
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, p256, p256Key())
	if err != nil {
		t.Fatal(err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})

	var all []byte
	all = append(all, "issuer keys, rotated 2026-03\n"...)
	for _, b := range [][]byte{pemOf(t, rsaPub), pkcs1, cert, pemOf(t, p384), pemOf(t, p521), pemOf(t, edPub)} {
		all = append(all, b...)
	}
	keys, err := jwtkey.ParsePEM(all)
	if err != nil {
		t.Fatal(err)
	}
	want := []crypto.PublicKey{rsaPub, rsaPub, p256, p384, p521, edPub}
	if len(keys) != len(want) {
		t.Fatalf("ParsePEM: %d keys, want %d", len(keys), len(want))
	}
	for i, k := range keys {
		if !k.(interface{ Equal(crypto.PublicKey) bool }).Equal(want[i]) {
			t.Errorf("key %d = %T, want %T %v", i, k, want[i], want[i])
		}
	}
}

func TestParsePEMErrors(t *testing.T) {
	small := must(rsa.GenerateKey(rand.Reader, 1024))
	p224 := must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader))
	block := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	good := pemOf(t, &p256Key().PublicKey)
	for i, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, "no PEM block found"},
		{[]byte("not pem at all"), "no PEM block found"},
		{[]byte("-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----\n"), "no PEM block found"},
		{block("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(p256Key()))), `PEM block 1 is a private key ("PRIVATE KEY"): give the public key only`},
		{append(good, block("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p256Key())))...), `PEM block 2 is a private key ("EC PRIVATE KEY"): give the public key only`},
		{block("CERTIFICATE REQUEST", []byte{1}), `PEM block 1: unsupported type "CERTIFICATE REQUEST" (want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)`},
		{block("PUBLIC KEY", []byte("junk")), "PEM block 1 (PUBLIC KEY): asn1: structure error"},
		{block("RSA PUBLIC KEY", []byte("junk")), "PEM block 1 (RSA PUBLIC KEY): asn1: structure error"},
		{block("CERTIFICATE", []byte("junk")), "PEM block 1 (CERTIFICATE): x509: malformed"},
		{pemOf(t, &small.PublicKey), "PEM block 1 (PUBLIC KEY): RSA key of 1024 bits: at least 2048 are needed"},
		{append(good, pemOf(t, &p224.PublicKey)...), "PEM block 2 (PUBLIC KEY): ECDSA curve P-224 is not supported (want P-256, P-384 or P-521)"},
	} {
		keys, err := jwtkey.ParsePEM(tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Test %d: ParsePEM = %d keys, %v; want error %q", i, len(keys), err, tc.want)
		}
	}
}

func TestParseJWKS(t *testing.T) {
	rsaPub, p256, p521 := &rsaKey().PublicKey, &p256Key().PublicKey, &p521Key().PublicKey
	edPub := edPrivKey().Public().(ed25519.PublicKey)
	padded := jwkOf(rsaPub)
	padded["n"] = base64.URLEncoding.EncodeToString(rsaPub.N.Bytes()) // with "=" padding
	set, err := jwtkey.ParseJWKS(jwks(
		with(jwkOf(rsaPub), "kid", "r", "alg", "RS256", "use", "sig"),
		with(jwkOf(p256), "kid", "e", "alg", "ES256"),
		with(jwkOf(p521), "kid", "e5"),
		with(jwkOf(edPub), "kid", "ed", "alg", "EdDSA"),
		padded,
		// skipped:
		with(jwkOf(rsaPub), "kid", "enc", "use", "enc"),
		with(jwkOf(rsaPub), "kid", "oaep", "alg", "RSA-OAEP"),
		map[string]any{"kty": "OKP", "crv": "X25519", "x": "AAAA"},
		map[string]any{"kty": "EC", "crv": "secp256k1", "x": "AAAA", "y": "AAAA"},
		map[string]any{"kty": "PQ", "kid": "future"},
		with(jwkOf(p256), "kid", "ops"),
	))
	if err != nil {
		t.Fatal(err)
	}
	if n := set.Len(); n != 6 { // the "ops" key has no key_ops, so it is kept
		t.Errorf("Len = %d, want 6", n)
	}
	withOps := jwkOf(p256)
	withOps["key_ops"] = []string{"encrypt"}
	set, err = jwtkey.ParseJWKS(jwks(jwkOf(edPub), withOps))
	if err != nil || set.Len() != 1 {
		t.Errorf(`key_ops without "verify": Len = %d, %v; want 1`, set.Len(), err)
	}
	if n := (*jwtkey.KeySet)(nil).Len(); n != 0 {
		t.Errorf("nil KeySet: Len = %d", n)
	}
}

func TestParseJWKSErrors(t *testing.T) {
	rsaPub, p256 := &rsaKey().PublicKey, &p256Key().PublicKey
	small := must(rsa.GenerateKey(rand.Reader, 1024))
	set := func(members map[string]any) []byte { return jwks(members) }
	edit := func(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
	offCurve := jwkOf(p256)
	x := must(base64.RawURLEncoding.DecodeString(offCurve["x"].(string)))
	x[len(x)-1] ^= 1
	offCurve["x"] = base64.RawURLEncoding.EncodeToString(x)
	for i, tc := range []struct {
		in   []byte
		want string
	}{
		{[]byte("nope"), "reading JWK Set: invalid character 'o' in literal null (expecting 'u')"},
		{[]byte(`{"kty":"RSA"}`), `not a JWK Set: no "keys" array`},
		{[]byte(`{"keys":{}}`), "reading JWK Set: json: cannot unmarshal object into Go struct field .keys of type []jwtkey.rawJWK"},
		{[]byte(`{"keys":[]}`), "no usable signature key in JWK Set (0 keys skipped)"},
		{jwks(with(jwkOf(rsaPub), "use", "enc")), "no usable signature key in JWK Set (1 keys skipped)"},
		{set(with(jwkOf(p256), "kid", "k1", "d", "c2VjcmV0")), `JWK Set key 0 (kid "k1"): holds a private key ("d"): publish only public keys`},
		{set(with(jwkOf(p256), "use", "enc", "d", "c2VjcmV0")), `JWK Set key 0 (kid ""): holds a private key ("d"): publish only public keys`},
		{set(map[string]any{"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"}), `JWK Set key 0 (kid ""): symmetric ("oct") keys are not read from a JWK Set: give the secret as HMACSecret`},
		{set(edit(jwkOf(rsaPub), "n", "!!")), `JWK Set key 0 (kid ""): "n" is not base64url: illegal base64 data at input byte 0`},
		{set(edit(jwkOf(rsaPub), "e", "")), `JWK Set key 0 (kid ""): "e" is missing`},
		{set(edit(jwkOf(rsaPub), "e", "AQABAQAB")), `JWK Set key 0 (kid ""): "e" of 6 bytes`},
		{set(edit(jwkOf(rsaPub), "e", "Ag")), `JWK Set key 0 (kid ""): RSA public exponent 2 is invalid`},
		{set(jwkOf(&small.PublicKey)), `JWK Set key 0 (kid ""): RSA key of 1024 bits: at least 2048 are needed`},
		{set(edit(jwkOf(p256), "y", "AAAA")), `JWK Set key 0 (kid ""): "x" and "y" must have 32 bytes each for P-256, not 32 and 3`},
		{set(offCurve), `JWK Set key 0 (kid ""): P256 point not on curve`},
		{set(edit(jwkOf(edPrivKey().Public()), "x", "AAAA")), `JWK Set key 0 (kid ""): Ed25519 key of 3 bytes: want 32`},
		{set(with(jwkOf(rsaPub), "alg", "ES256")), `JWK Set key 0 (kid ""): alg "ES256" does not fit a RSA key`},
		{set(with(jwkOf(p256), "alg", "ES384")), `JWK Set key 0 (kid ""): alg "ES384" does not fit a EC key`},
		{jwks(jwkOf(p256), with(jwkOf(rsaPub), "kid", "2", "n", "")), `JWK Set key 1 (kid "2"): "n" is missing`},
	} {
		s, err := jwtkey.ParseJWKS(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Test %d: ParseJWKS = %d keys, %v; want error %q", i, s.Len(), err, tc.want)
		}
	}
}
