package jwtkey_test

import (
	"crypto"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

func es256Verifier(t testing.TB, cacheSize int) *jwtkey.Verifier {
	return newVerifier(t, jwtkey.Config{Algorithms: []string{"ES256"}, PublicKeys: []crypto.PublicKey{&p256Key().PublicKey}, CacheSize: cacheSize})
}

func TestCacheHitReturnsSameClaims(t *testing.T) {
	v := es256Verifier(t, 0)
	tok := sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), nil)
	if v.Cached(tok, t0) {
		t.Fatal("cached before the first Verify")
	}
	first, err := v.Verify(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Cached(tok, t0) {
		t.Fatal("not cached after Verify")
	}
	second, err := v.Verify(tok, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !jwtkey.SameClaims(first, second) {
		t.Error("second Verify did not return the cached claims")
	}
	if sub, ok := second.Get("sub"); sub != "alice" || !ok {
		t.Errorf("cached Get(sub) = %q, %v", sub, ok)
	}
}

func TestCacheExpiredEntryNotServed(t *testing.T) {
	v := es256Verifier(t, 0)
	exp := t0.Add(time.Minute)
	tok := sign(t, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"exp": exp.Unix()}), nil)
	if _, err := v.Verify(tok, t0); err != nil {
		t.Fatal(err)
	}
	last := exp.Add(jwtkey.DefaultLeeway - time.Nanosecond)
	if !v.Cached(tok, last) {
		t.Error("not served at the last valid instant")
	}
	end := exp.Add(jwtkey.DefaultLeeway)
	if v.Cached(tok, end) {
		t.Error("served from the cache once expired")
	}
	_, err := v.Verify(tok, end)
	wantReason(t, err, "expired")
	if v.Cached(tok, t0) {
		t.Error("the expired entry was not dropped")
	}
}

func TestCacheRechecksNotBefore(t *testing.T) {
	v := es256Verifier(t, 0)
	nbf := t0.Add(time.Minute)
	tok := sign(t, jwt.SigningMethodES256, p256Key(), claims(map[string]any{"nbf": nbf.Unix()}), nil)
	if _, err := v.Verify(tok, nbf); err != nil {
		t.Fatal(err)
	}
	// The clock goes back before nbf−leeway.
	_, err := v.Verify(tok, nbf.Add(-jwtkey.DefaultLeeway-time.Nanosecond))
	wantReason(t, err, "not_yet_valid")
	if !v.Cached(tok, nbf) {
		t.Error("entry dropped though it becomes valid again")
	}
}

func TestCacheOneByteDifferentNotServed(t *testing.T) {
	v := es256Verifier(t, 0)
	tok := sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), nil)
	if _, err := v.Verify(tok, t0); err != nil {
		t.Fatal(err)
	}
	for i := range len(tok) {
		if tok[i] == '.' {
			continue
		}
		other := flip(tok, i)
		if v.Cached(other, t0) {
			t.Fatalf("byte %d changed: served from the cache", i)
		}
		if _, err := v.Verify(other, t0); err == nil {
			t.Fatalf("byte %d changed: Verify succeeded", i)
		}
	}
	if _, err := v.Verify(tok+"A", t0); err == nil {
		t.Fatal("a byte added: Verify succeeded")
	}
}

func TestCacheSize(t *testing.T) {
	for i, tc := range []struct {
		cfg   jwtkey.Config
		slots int
	}{
		{jwtkey.Config{}, jwtkey.DefaultCacheSize},
		{jwtkey.Config{CacheSize: -1}, 0},
		{jwtkey.Config{CacheSize: 1}, 1},
		{jwtkey.Config{CacheSize: 1000}, 1024},
		{jwtkey.Config{CacheSize: 1 << 30}, 1 << 20},
	} {
		tc.cfg.Algorithms, tc.cfg.HMACSecret = []string{"HS256"}, hmacSecret
		if got := newVerifier(t, tc.cfg).CacheSlots(); got != tc.slots {
			t.Errorf("Test %d: CacheSize %d: %d slots, want %d", i, tc.cfg.CacheSize, got, tc.slots)
		}
	}
}

func TestCacheDisabled(t *testing.T) {
	v := es256Verifier(t, -1)
	tok := sign(t, jwt.SigningMethodES256, p256Key(), claims(nil), nil)
	a, err := v.Verify(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.Verify(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	if jwtkey.SameClaims(a, b) || v.Cached(tok, t0) {
		t.Error("served from a disabled cache")
	}
}
