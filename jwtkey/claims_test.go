package jwtkey_test

import (
	"crypto"
	"encoding/json"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/edgebyte/edgelimit/jwtkey"
)

const claimsJSON = `{
	"sub": "alice",
	"tenant": {"id": 42, "name": "acme", "plan": {"tier": "gold"}},
	"big": 12345678901234567890,
	"neg": -12345678901234567890123,
	"price": 1.50,
	"kilo": 1e3,
	"kilo2": 1000.0,
	"milli": 1E-3,
	"zero": -0,
	"on": true,
	"off": false,
	"none": null,
	"list": ["a"],
	"obj": {},
	"empty": "",
	"https://example.com/tenant": "namespaced",
	"a.b": "top-level",
	"a": {"b": "nested", "c": "only-nested"},
	"huge": 1e64,
	"long": 1e63
}`

func TestClaimsGet(t *testing.T) {
	c, err := jwtkey.ClaimsFromJSON([]byte(claimsJSON))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		path string
		want string
		ok   bool
	}{
		{"sub", "alice", true},
		{"tenant.id", "42", true},
		{"tenant.name", "acme", true},
		{"tenant.plan.tier", "gold", true},
		{"big", "12345678901234567890", true},
		{"neg", "-12345678901234567890123", true},
		{"price", "1.5", true},
		{"kilo", "1000", true},
		{"kilo2", "1000", true},
		{"milli", "0.001", true},
		{"zero", "0", true},
		{"on", "true", true},
		{"off", "false", true},
		{"empty", "", true},
		{"https://example.com/tenant", "namespaced", true},
		{"a.b", "top-level", true}, // an exact top-level name first
		{"a.c", "only-nested", true},
		{"long", "1" + strings.Repeat("0", 63), true},
		{"huge", "", false}, // 65 digits
		{"none", "", false},
		{"list", "", false},
		{"obj", "", false},
		{"tenant", "", false},
		{"missing", "", false},
		{"tenant.missing", "", false},
		{"sub.x", "", false}, // into a string
		{"tenant.plan.tier.x", "", false},
		{"", "", false},
		{".sub", "", false},
		{"tenant..id", "", false},
		{"tenant.", "", false},
		{"SUB", "", false}, // names are case-sensitive
	} {
		got, ok := c.Get(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Test %d: Get(%q) = %q, %v; want %q, %v", i, tc.path, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := (jwtkey.Claims{}).Get("sub"); got != "" || ok {
		t.Errorf("zero Claims: Get(sub) = %q, %v", got, ok)
	}
}

func TestClaimsGetDepth(t *testing.T) {
	// {"k":{"k":…{"k":"leaf"}…}} with depth levels
	nest := func(depth int) string {
		return strings.Repeat(`{"k":`, depth) + `"leaf"` + strings.Repeat("}", depth)
	}
	path := func(depth int) string { return strings.TrimSuffix(strings.Repeat("k.", depth), ".") }
	for i, tc := range []struct {
		depth int
		ok    bool
	}{
		{1, true},
		{jwtkey.MaxPathDepth, true},
		{jwtkey.MaxPathDepth + 1, false},
		{1000, false},
	} {
		c, err := jwtkey.ClaimsFromJSON([]byte(nest(tc.depth)))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := c.Get(path(tc.depth))
		if ok != tc.ok || (ok && got != "leaf") {
			t.Errorf("Test %d: depth %d: Get = %q, %v; want ok %v", i, tc.depth, got, ok, tc.ok)
		}
	}
}

func TestVerifyNumericClaim(t *testing.T) {
	v := newVerifier(t, jwtkey.Config{Algorithms: []string{"EdDSA"}, PublicKeys: []crypto.PublicKey{edPrivKey().Public()}})
	tok := sign(t, jwt.SigningMethodEdDSA, edPrivKey(), claims(map[string]any{
		"sub":    json.Number("12345678901234567890"),
		"tenant": map[string]any{"id": json.Number("9007199254740993")}, // 2^53+1: no float64
	}), nil)
	c, err := v.Verify(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"sub": "12345678901234567890", "tenant.id": "9007199254740993"} {
		if got, ok := c.Get(path); got != want || !ok {
			t.Errorf("Get(%q) = %q, %v; want %q, true", path, got, ok, want)
		}
	}
	if got, ok := c.Get("nope"); got != "" || ok {
		t.Errorf("Get(nope) = %q, %v; want missing", got, ok)
	}
}
