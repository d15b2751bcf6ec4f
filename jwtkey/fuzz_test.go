package jwtkey_test

import (
	"crypto"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

var reasons = []string{"too_large", "malformed", "algorithm", "unknown_key", "signature", "expired", "not_yet_valid", "issuer", "audience"}

// FuzzVerify feeds token strings to an HS256 and an ES256 verifier: they
// never panic, every error has a Reason of the fixed set, and only the valid
// tokens made here verify (a mutation that verified would be a forgery).
func FuzzVerify(f *testing.F) {
	hs := newVerifier(f, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret, Issuer: "idp"})
	es := newVerifier(f, jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}, Issuer: "idp"})
	c := claims(map[string]any{"iss": "idp", "tenant": map[string]any{"id": 7}})
	valid := map[string]bool{
		sign(f, jwt.SigningMethodHS256, hmacSecret, c, nil):                                               true,
		sign(f, jwt.SigningMethodES256, p256Key(), c, nil):                                                true,
		sign(f, jwt.SigningMethodES256, p256Key(), c, map[string]any{"kid": "k"}):                         true,
		sign(f, jwt.SigningMethodHS256, hmacSecret, c, map[string]any{"typ": nil}):                        true,
		sign(f, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"iss": "idp", "exp": nil}), nil): true,
	}
	for tok := range valid {
		f.Add(tok)
	}
	f.Add(sign(f, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), c, nil))
	f.Add(sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, c, nil))
	f.Add(rawToken(`{"alg":"ES256","crit":["b64"],"kid":1}`, `{"exp":1e999,"nbf":"x","aud":[1,{}]}`, []byte{1, 2}))
	f.Add("")
	f.Add("..")
	f.Fuzz(func(t *testing.T, tok string) {
		for _, v := range []*jwtkey.Verifier{hs, es} {
			c, err := v.Verify(tok, t0)
			if err != nil {
				if r := jwtkey.Reason(err); !slices.Contains(reasons, r) {
					t.Fatalf("Verify(%q): Reason(%v) = %q", tok, err, r)
				}
				continue
			}
			if !valid[tok] {
				t.Fatalf("Verify(%q) succeeded for a token not made here", tok)
			}
			if sub, ok := c.Get("sub"); sub != "alice" || !ok {
				t.Fatalf("Get(sub) = %q, %v", sub, ok)
			}
		}
	})
}

// FuzzBearerToken: BearerToken never panics, returns a non-empty token68 cut
// from its input, and finds again what "Bearer " is put in front of.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "bearer  x==", " BEARER\tx ", "Basic abc", "Bearer", "Bearer a b", "Bearer é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := jwtkey.BearerToken(s)
		if !ok {
			if tok != "" {
				t.Fatalf("BearerToken(%q) = %q, false", s, tok)
			}
			return
		}
		if tok == "" || !strings.Contains(s, tok) || strings.ContainsAny(tok, " \t,\"") {
			t.Fatalf("BearerToken(%q) = %q", s, tok)
		}
		if again, ok := jwtkey.BearerToken("Bearer " + tok); again != tok || !ok {
			t.Fatalf("BearerToken(Bearer %q) = %q, %v", tok, again, ok)
		}
	})
}

// FuzzClaimsGet: Get never panics; it returns strings as they are, and
// numbers exactly (the same rational value) in a canonical form of at most 64
// characters.
func FuzzClaimsGet(f *testing.F) {
	f.Add([]byte(claimsJSON), "tenant.plan.tier")
	f.Add([]byte(claimsJSON), "big")
	f.Add([]byte(claimsJSON), "a.b")
	f.Add([]byte(`{"n":-0.000123e+5}`), "n")
	f.Add([]byte(`{"n":1.5E-7,"m":{"n":9e63}}`), "m.n")
	f.Add([]byte(`{"a":{"b":{"c":[1,2]}}}`), "a.b.c")
	f.Fuzz(func(t *testing.T, payload []byte, path string) {
		c, err := jwtkey.ClaimsFromJSON(payload)
		if err != nil {
			return
		}
		got, ok := c.Get(path)
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(payload)))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			t.Fatal("payload decoded once but not twice")
		}
		switch want := lookup(m, path).(type) {
		case string:
			if got != want || !ok {
				t.Fatalf("Get(%q) = %q, %v; want %q", path, got, ok, want)
			}
		case json.Number:
			if !ok {
				if len(want) <= 64 && !strings.ContainsAny(string(want), "eE.-") {
					t.Fatalf("Get(%q) refused the integer %s", path, want)
				}
				return
			}
			if len(got) > 64 || strings.ContainsAny(got, "eE+") || strings.HasSuffix(got, ".") {
				t.Fatalf("Get(%q) = %q for %s: not canonical", path, got, want)
			}
			if exp := strings.IndexAny(string(want), "eE"); exp >= 0 && len(strings.TrimLeft(string(want[exp+1:]), "+-0")) > 4 {
				return // too costly for big.Rat to check
			}
			wr, _ := new(big.Rat).SetString(string(want))
			gr, gok := new(big.Rat).SetString(got)
			if !gok || wr.Cmp(gr) != 0 {
				t.Fatalf("Get(%q) = %q for %s: another value", path, got, want)
			}
		case bool:
			if want && got != "true" || !want && got != "false" || !ok {
				t.Fatalf("Get(%q) = %q, %v for %v", path, got, ok, want)
			}
		default: // missing, null, array, object
			if ok || got != "" {
				t.Fatalf("Get(%q) = %q, %v for %T", path, got, ok, want)
			}
		}
	})
}

// lookup is the specification of Get's path: an exact top-level name, or else
// dot-separated names into nested objects, at most MaxPathDepth of them.
func lookup(m map[string]any, path string) any {
	if v, ok := m[path]; ok && path != "" {
		return v
	}
	segs := strings.Split(path, ".")
	if len(segs) < 2 || len(segs) > jwtkey.MaxPathDepth {
		return nil
	}
	var cur any = m
	for _, s := range segs {
		obj, ok := cur.(map[string]any)
		if !ok || s == "" {
			return nil
		}
		cur = obj[s]
	}
	return cur
}
