package jwtkey

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// MinRSABits is the smallest RSA modulus accepted, in bits.
const MinRSABits = 2048

// ParsePEM reads the public keys of PEM blocks: "PUBLIC KEY" (PKIX),
// "RSA PUBLIC KEY" (PKCS #1) and "CERTIFICATE" (only its public key is used:
// the certificate's dates and chain are not checked). Text around the blocks
// is ignored. Keys must be RSA of at least [MinRSABits] bits, ECDSA on P-256,
// P-384 or P-521, or Ed25519. It fails if there is no block, or names the
// block that is of another type (a private key, say) or holds another key.
func ParsePEM(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		var key crypto.PublicKey
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		default:
			if strings.Contains(block.Type, "PRIVATE") {
				return nil, fmt.Errorf("PEM block %d is a private key (%q): give the public key only", n, block.Type)
			}
			return nil, fmt.Errorf("PEM block %d: unsupported type %q (want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE)", n, block.Type)
		}
		if err == nil {
			err = checkPublicKey(key)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %v", n, block.Type, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM block found")
	}
	return keys, nil
}

// checkPublicKey reports whether key is one the verifier can use.
func checkPublicKey(key crypto.PublicKey) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return errors.New("empty RSA key")
		}
		if bits := k.N.BitLen(); bits < MinRSABits {
			return fmt.Errorf("RSA key of %d bits: at least %d are needed", bits, MinRSABits)
		}
		if k.E < 3 || k.E%2 == 0 {
			return fmt.Errorf("RSA public exponent %d is invalid", k.E)
		}
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return errors.New("empty ECDSA key")
		}
		if curveAlg(k.Curve) == "" {
			return fmt.Errorf("ECDSA curve %s is not supported (want P-256, P-384 or P-521)", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("Ed25519 key of %d bytes: want %d", len(k), ed25519.PublicKeySize)
		}
	default:
		return fmt.Errorf("unsupported key type %T (want RSA, ECDSA or Ed25519 public key)", key)
	}
	return nil
}

// curveAlg returns the algorithm that signs with curve, or "".
func curveAlg(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// A KeySet holds the signature keys of a JWK Set (RFC 7517), by key ID.
// Make one with [ParseJWKS]; it is read-only and safe for concurrent use.
type KeySet struct {
	keys []jwk
}

// jwk is one usable key of a KeySet.
type jwk struct {
	kid string // "" if none
	alg string // "" if any algorithm of the key's type
	key crypto.PublicKey
}

// Len returns the number of keys in the set.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// ParseJWKS reads a JWK Set document ({"keys":[…]}). It keeps RSA keys, EC
// keys on P-256, P-384 or P-521 and OKP Ed25519 keys, with their "kid" and
// "alg". As RFC 7517 asks, it skips keys it cannot use for signatures: other
// key types and curves, "use" other than "sig", "key_ops" without "verify",
// and "alg" values that are not signature algorithms (RSA-OAEP, say). It fails
// on a document that is not a JWK Set, on a key that is malformed or too weak
// (RSA under [MinRSABits] bits), whose "alg" does not fit its type, that holds
// private parts ("d"), or that is symmetric ("oct": give HMAC secrets as
// [Config.HMACSecret]), and when no usable key remains. It does not read
// certificates ("x5c").
func ParseJWKS(data []byte) (*KeySet, error) {
	var doc struct {
		Keys []rawJWK `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reading JWK Set: %v", err)
	}
	if doc.Keys == nil {
		return nil, errors.New(`not a JWK Set: no "keys" array`)
	}
	set := &KeySet{}
	for i, r := range doc.Keys {
		key, err := r.publicKey()
		if err == nil && key != nil {
			err = checkPublicKey(key)
		}
		if err == nil && key != nil && r.Alg != "" && !algFits(r.Alg, key) {
			err = fmt.Errorf("alg %q does not fit a %s key", r.Alg, r.Kty)
		}
		if err != nil {
			return nil, fmt.Errorf("JWK Set key %d (kid %q): %v", i, r.Kid, err)
		}
		if key != nil {
			set.keys = append(set.keys, jwk{kid: r.Kid, alg: r.Alg, key: key})
		}
	}
	if len(set.keys) == 0 {
		return nil, fmt.Errorf("no usable signature key in JWK Set (%d keys skipped)", len(doc.Keys))
	}
	return set, nil
}

// rawJWK holds the members of a JWK that ParseJWKS reads.
type rawJWK struct {
	Kty    string          `json:"kty"`
	Kid    string          `json:"kid"`
	Alg    string          `json:"alg"`
	Use    string          `json:"use"`
	KeyOps []string        `json:"key_ops"`
	Crv    string          `json:"crv"`
	N      string          `json:"n"`
	E      string          `json:"e"`
	X      string          `json:"x"`
	Y      string          `json:"y"`
	D      json.RawMessage `json:"d"`
}

// publicKey returns the key, or nil if it is to be skipped.
func (r *rawJWK) publicKey() (crypto.PublicKey, error) {
	if r.D != nil {
		return nil, errors.New(`holds a private key ("d"): publish only public keys`)
	}
	if r.Use != "" && r.Use != "sig" ||
		r.KeyOps != nil && !slices.Contains(r.KeyOps, "verify") ||
		r.Alg != "" && algorithms[r.Alg].family == 0 && r.Kty != "oct" {
		return nil, nil
	}
	switch r.Kty {
	case "RSA":
		n, e, err := b64Pair(r.N, "n", r.E, "e")
		if err != nil {
			return nil, err
		}
		if len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf(`"e" of %d bytes`, len(e))
		}
		exp := 0
		for _, b := range e {
			exp = exp<<8 | int(b)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
	case "EC":
		var curve elliptic.Curve
		switch r.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, nil // secp256k1 and others: not supported, skipped
		}
		size := (curve.Params().BitSize + 7) / 8
		x, y, err := b64Pair(r.X, "x", r.Y, "y")
		if err != nil {
			return nil, err
		}
		if len(x) != size || len(y) != size {
			return nil, fmt.Errorf(`"x" and "y" must have %d bytes each for %s, not %d and %d`, size, r.Crv, len(x), len(y))
		}
		point := append(append([]byte{4}, x...), y...)
		return ecdsa.ParseUncompressedPublicKey(curve, point)
	case "OKP":
		if r.Crv != "Ed25519" {
			return nil, nil // X25519 (encryption), Ed448: skipped
		}
		x, err := b64(r.X, "x")
		if err != nil {
			return nil, err
		}
		return ed25519.PublicKey(x), nil
	case "oct":
		return nil, errors.New(`symmetric ("oct") keys are not read from a JWK Set: give the secret as HMACSecret`)
	}
	return nil, nil // unknown key type: skipped
}

// b64 decodes a base64url member, with or without padding.
func b64(s, name string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%q is missing", name)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("%q is not base64url: %v", name, err)
	}
	return b, nil
}

// b64Pair decodes the two base64url members a key is made of: n and e of
// RSA, x and y of EC.
func b64Pair(a, aName, b, bName string) ([]byte, []byte, error) {
	x, err := b64(a, aName)
	if err != nil {
		return nil, nil, err
	}
	y, err := b64(b, bName)
	if err != nil {
		return nil, nil, err
	}
	return x, y, nil
}
