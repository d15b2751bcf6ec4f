package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwtSecret is the HS256 secret of the tests (32 bytes).
const jwtSecret = "0123456789abcdef0123456789abcdef"

// jwtCaddyfile keys /api/ by the token's sub, 3 a month, falling back to
// the client IP for a request without a verified token; /es/ does the same
// with ES256 tokens checked against a PEM key.
const jwtCaddyfile = `{
	{{.Global}}
	rate_limit {
		jwt {
			hmac_secret {env.EDGELIMIT_JWT_SECRET}
			public_key_file {$EDGELIMIT_JWT_PEM}
			algorithms HS256 ES256
			issuer https://id.example.com/
		}
	}
}
:{{.HTTP}} {
	rate_limit /api/* {
		name by_user
		limit 3 30d
		by jwt sub
		on_missing_key ip
	}
	rate_limit /tiered/* {
		name tiered
		limit 2 30d
		by jwt sub
		tier_by jwt plan
		tier pro 5/30d
		tier blocked 0/30d
		key_hash sha256
		log_key
	}
	respond "ok"
}
`

// hs256 signs claims with jwtSecret.
func hs256(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bearer is the Authorization header pair of a token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// userClaims are valid claims for sub.
func userClaims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iss": "https://id.example.com/", "exp": time.Now().Add(time.Hour).Unix()}
}

// startJWT runs jwtCaddyfile with an ES256 key written as PEM, and returns
// the key.
func startJWT(t *testing.T) (*caddyProc, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(t.TempDir(), "jwt.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCaddy(t, jwtCaddyfile, "EDGELIMIT_JWT_SECRET="+jwtSecret, "EDGELIMIT_JWT_PEM="+pemFile)
	return p, key
}

// TestJWTUsersLimitedSeparately: two users with valid tokens (HS256 and
// ES256) each have their own 3 requests.
func TestJWTUsersLimitedSeparately(t *testing.T) {
	t.Parallel()
	p, key := startJWT(t)
	es, err := jwt.NewWithClaims(jwt.SigningMethodES256, userClaims("bob")).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, "alice (HS256)", p.statuses(t, 4, "/api/x", bearer(hs256(t, userClaims("alice")))...), seq(3, 200, 1, 429))
	wantStatuses(t, "bob (ES256)", p.statuses(t, 4, "/api/x", bearer(es)...), seq(3, 200, 1, 429))
	// a new token of alice's is still alice
	wantStatuses(t, "alice, new token", p.statuses(t, 1, "/api/x", bearer(hs256(t, jwt.MapClaims{"sub": "alice", "iss": "https://id.example.com/"}))...), seq(0, 0, 1, 429))
	var k adminKey
	p.adminJSON(t, "/rate_limit/rules/by_user/keys/alice", &k)
	if k.Limits[0].Used != 3 {
		t.Errorf("key alice: %+v", k)
	}
}

// TestJWTForgedFallsBackToIP: tokens that fail verification (bad
// signature, alg none, expired, wrong issuer, garbage) never make keys of
// their own: they all count against the client's IP, and are counted by
// reason in the metrics.
func TestJWTForgedFallsBackToIP(t *testing.T) {
	t.Parallel()
	p, _ := startJWT(t)
	valid := hs256(t, userClaims("mallory"))
	parts := strings.Split(valid, ".")
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString([]byte("not the signature, not at all..."))
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, userClaims("mallory")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	expired := userClaims("mallory")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	wrongIss := userClaims("mallory")
	wrongIss["iss"] = "https://evil.example/"
	var got []int
	for _, tok := range []string{badSig, none, hs256(t, expired), hs256(t, wrongIss), "garbage"} {
		got = append(got, p.status(t, "/api/x", bearer(tok)...))
	}
	got = append(got, p.status(t, "/api/x"))                   // no token: the same IP
	got = append(got, p.status(t, "/api/x", bearer(valid)...)) // mallory's real token: her own bucket
	wantStatuses(t, "forged tokens from one IP", got, []int{200, 200, 200, 429, 429, 429, 200})

	code, body := p.admin(t, "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for reason, want := range map[string]string{"signature": "1", "algorithm": "1", "expired": "1", "issuer": "1", "malformed": "1"} {
		if got := metricValue(t, body, `caddy_rate_limit_jwt_failures_total{reason="`+reason+`"}`); got != want {
			t.Errorf("jwt failures %s: %s, want %s", reason, got, want)
		}
	}
	var top adminTop
	p.adminJSON(t, "/rate_limit/rules/by_user/keys", &top)
	for _, k := range top.Keys {
		if k.Key != "\x00127.0.0.1" && k.Key != "mallory" {
			t.Errorf("a key %q besides the fallback IP and mallory", k.Key)
		}
	}
}

// TestJWTTiers: a token's plan claim picks the tier's limits; no plan or
// an unknown one gets the rule's; keys are kept hashed (key_hash), so the
// admin API and the logs never show a subject in clear.
func TestJWTTiers(t *testing.T) {
	t.Parallel()
	p, _ := startJWT(t)
	withPlan := func(sub, plan string) []string {
		c := userClaims(sub)
		if plan != "" {
			c["plan"] = plan
		}
		return bearer(hs256(t, c))
	}
	wantStatuses(t, "alice, pro", p.statuses(t, 6, "/tiered/x", withPlan("alice", "pro")...), seq(5, 200, 1, 429))
	wantStatuses(t, "bob, no plan", p.statuses(t, 3, "/tiered/x", withPlan("bob", "")...), seq(2, 200, 1, 429))
	wantStatuses(t, "carl, unknown plan", p.statuses(t, 3, "/tiered/x", withPlan("carl", "gold")...), seq(2, 200, 1, 429))
	wantStatuses(t, "dave, blocked", p.statuses(t, 1, "/tiered/x", withPlan("dave", "blocked")...), seq(0, 0, 1, 429))

	sum := sha256.Sum256([]byte("alice"))
	alice := hex.EncodeToString(sum[:])
	var k adminKey
	p.adminJSON(t, "/rate_limit/rules/tiered/keys/"+alice+"?tier=pro", &k)
	if len(k.Limits) != 1 || k.Limits[0].Used != 5 {
		t.Errorf("alice by her hashed key: %+v", k)
	}
	_, body := p.admin(t, "GET", "/rate_limit/rules/tiered/keys", "")
	if strings.Contains(body, "alice") || !strings.Contains(body, alice) {
		t.Errorf("top keys of a key_hash rule: %s", body)
	}
	if line := p.waitLog(`"rule":"tiered"`, `"msg":"rate limit exceeded"`); strings.Contains(line, "alice") || strings.Contains(line, "bob") || !strings.Contains(line, `"key":"`) {
		t.Errorf("denial log of a key_hash rule: %s", line)
	}
}
