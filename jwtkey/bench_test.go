package jwtkey_test

import (
	"crypto"
	"fmt"
	"runtime"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

// BenchmarkVerify measures Verify then Get("tenant.id") of one token, with
// the cache (every call after the first a hit) and without.
func BenchmarkVerify(b *testing.B) {
	c := claims(map[string]any{"iss": "https://id.example.com/", "aud": "api", "tenant": map[string]any{"id": "acme"}, "scope": "read write"})
	for _, alg := range []struct {
		name string
		cfg  jwtkey.Config
		tok  func() string
	}{
		{"HS256", jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret},
			func() string { return sign(b, jwt.SigningMethodHS256, hmacSecret, c, nil) }},
		{"ES256", jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}},
			func() string { return sign(b, jwt.SigningMethodES256, p256Key(), c, nil) }},
		{"RS256", jwtkey.Config{Algorithms: []string{"RS256"}, PublicKeys: []crypto.PublicKey{&rsaKey().PublicKey}},
			func() string { return sign(b, jwt.SigningMethodRS256, rsaKey(), c, nil) }},
		{"EdDSA", jwtkey.Config{Algorithms: []string{"EdDSA"}, PublicKeys: []crypto.PublicKey{edPrivKey().Public()}},
			func() string { return sign(b, jwt.SigningMethodEdDSA, edPrivKey(), c, nil) }},
	} {
		tok := alg.tok()
		for _, cache := range []struct {
			name string
			size int
		}{{"uncached", -1}, {"cached", 0}} {
			cfg := alg.cfg
			cfg.Issuer, cfg.Audience, cfg.CacheSize = "https://id.example.com/", "api", cache.size
			v := newVerifier(b, cfg)
			b.Run(alg.name+"/"+cache.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c, err := v.Verify(tok, t0)
					if err != nil {
						b.Fatal(err)
					}
					if _, ok := c.Get("tenant.id"); !ok {
						b.Fatal("no tenant.id")
					}
				}
			})
		}
	}
}

// BenchmarkVerifyParallel is a cache hit from all CPUs at once.
func BenchmarkVerifyParallel(b *testing.B) {
	v := es256Verifier(b, 0)
	tok := sign(b, jwt.SigningMethodES256, p256Key(), claims(nil), nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(tok, t0); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkVerifyForged is the cost of a hostile ES256 token with a bad
// signature: never cached, each one checked.
func BenchmarkVerifyForged(b *testing.B) {
	v := es256Verifier(b, 0)
	tok := withSig(sign(b, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"sub": "mallory"}), nil),
		sign(b, jwt.SigningMethodES256, p256Key(), claims(nil), nil))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok, t0); err == nil {
			b.Fatal("forged token verified")
		}
	}
}

func BenchmarkBearerToken(b *testing.B) {
	h := "Bearer " + sign(b, jwt.SigningMethodHS256, hmacSecret, claims(nil), nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := jwtkey.BearerToken(h); !ok {
			b.Fatal("no token")
		}
	}
}

// BenchmarkCacheMemory fills a default cache with 1 KiB HS256 tokens of
// typical claims and reports the heap each cached token takes.
func BenchmarkCacheMemory(b *testing.B) {
	toks := make([]string, jwtkey.DefaultCacheSize)
	for i := range toks {
		toks[i] = sign(b, jwt.SigningMethodHS256, hmacSecret, claims(map[string]any{
			"sub":    fmt.Sprintf("user-%08d", i),
			"iss":    "https://id.example.com/",
			"aud":    []string{"api", "web"},
			"iat":    t0.Unix(),
			"jti":    fmt.Sprintf("%032x", i),
			"email":  fmt.Sprintf("user-%08d@example.com", i),
			"name":   "Alice Example",
			"tenant": map[string]any{"id": i % 100, "name": "acme", "plan": "gold"},
			"scope":  "openid profile email read:orders write:orders read:invoices",
			"roles":  []string{"admin", "billing", "support", "developer", "viewer", "auditor"},
			"azp":    "client-1234567890abcdef",
			"org":    "org_2f9a8b7c6d5e4f3a",
			"sess":   map[string]any{"id": fmt.Sprintf("%024x", i), "amr": []string{"pwd", "otp"}, "acr": "urn:mace:incommon:iap:silver"},
		}), nil)
	}
	var perEntry float64
	var entries int
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := newVerifier(b, jwtkey.Config{Algorithms: []string{"HS256"}, HMACSecret: hmacSecret})
		for _, tok := range toks {
			if _, err := v.Verify(tok, t0); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		entries = v.CacheEntries()
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(entries)
		runtime.KeepAlive(v)
	}
	b.ReportMetric(float64(len(toks[0])), "token-bytes")
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(perEntry, "heap-bytes/entry")
}
