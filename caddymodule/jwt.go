package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/edgebyte/edgelimit/jwtkey"
)

// JWTConfig says how the tokens that `by jwt CLAIM` keys on are found and
// verified. A token that fails verification gives no key (on_missing_key
// decides, usually falling back to the client IP) and is counted in
// caddy_rate_limit_jwt_failures_total; it never becomes a key of its own.
type JWTConfig struct {
	// HMACSecret is the shared secret of HS256/HS384/HS512 tokens, at
	// least as long as the hash (32, 48, 64 bytes). Global placeholders
	// are replaced, so it can stay out of the config: {env.JWT_SECRET}.
	HMACSecret string `json:"hmac_secret,omitempty"`

	// PublicKeyFiles are PEM files of public keys (PUBLIC KEY, RSA PUBLIC
	// KEY or CERTIFICATE blocks): RSA of 2048 bits or more, ECDSA P-256,
	// P-384 or P-521, Ed25519.
	PublicKeyFiles []string `json:"public_key_files,omitempty"`

	// JWKSFile is a JSON Web Key Set file; tokens pick their key by kid.
	// Read at config load: reload to pick up rotated keys.
	JWKSFile string `json:"jwks_file,omitempty"`

	// Algorithms lists the accepted "alg" values (RS256, ES256, HS256,
	// EdDSA…). Required: no default, and "none" is never accepted.
	Algorithms []string `json:"algorithms,omitempty"`

	// Issuer, if set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`

	// Audience, if set, must be the token's aud or among them.
	Audience string `json:"audience,omitempty"`

	// Leeway is the clock skew allowed on exp and nbf. Default: 30s.
	Leeway caddy.Duration `json:"leeway,omitempty"`

	// FromHeader names the header holding the token: Authorization (the
	// default) takes a "Bearer" token; any other header is the token
	// itself.
	FromHeader string `json:"from_header,omitempty"`

	// FromCookie names a cookie holding the token, read instead of a
	// header.
	FromCookie string `json:"from_cookie,omitempty"`

	// Unverified trusts tokens without checking their signature (the
	// jwt_unverified opt-in), for setups where a layer in front has
	// verified them; exp, nbf, iss and aud are still checked. Never set it
	// if clients can reach Caddy directly: they could make up tokens, and
	// so keys. Logged as a warning at load. Default: off.
	Unverified bool `json:"unverified,omitempty"`
}

// tokens finds and verifies the tokens of requests for `by jwt` sources.
type tokens struct {
	verifier *jwtkey.Verifier
	header   string // canonical; "" when cookie is set
	cookie   string
}

// newTokens builds the verifier of a JWTConfig: keys are read from their
// files now, so a missing or bad key fails the config load.
func newTokens(cfg *JWTConfig, logger *zap.Logger) (*tokens, error) {
	repl := caddy.NewReplacer()
	vc := jwtkey.Config{
		Algorithms: cfg.Algorithms,
		Issuer:     repl.ReplaceKnown(cfg.Issuer, ""),
		Audience:   repl.ReplaceKnown(cfg.Audience, ""),
		Leeway:     time.Duration(cfg.Leeway),
		Unverified: cfg.Unverified,
	}
	if cfg.HMACSecret != "" {
		secret := repl.ReplaceKnown(cfg.HMACSecret, "")
		if secret == "" {
			return nil, fmt.Errorf("jwt: hmac_secret %q is empty once its placeholders are replaced", cfg.HMACSecret)
		}
		vc.HMACSecret = []byte(secret)
	}
	for _, f := range cfg.PublicKeyFiles {
		f = repl.ReplaceKnown(f, "")
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("jwt: public_key_file: %v", err)
		}
		keys, err := jwtkey.ParsePEM(data)
		if err != nil {
			return nil, fmt.Errorf("jwt: public_key_file %s: %v", f, err)
		}
		vc.PublicKeys = append(vc.PublicKeys, keys...)
	}
	if cfg.JWKSFile != "" {
		f := repl.ReplaceKnown(cfg.JWKSFile, "")
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("jwt: jwks_file: %v", err)
		}
		if vc.JWKS, err = jwtkey.ParseJWKS(data); err != nil {
			return nil, fmt.Errorf("jwt: jwks_file %s: %v", f, err)
		}
	}
	v, err := jwtkey.NewVerifier(vc)
	if err != nil {
		return nil, fmt.Errorf("jwt: %v", err)
	}
	if cfg.FromHeader != "" && cfg.FromCookie != "" {
		return nil, errors.New("jwt: from_header and from_cookie: give one")
	}
	t := &tokens{verifier: v, header: "Authorization", cookie: cfg.FromCookie}
	if cfg.FromHeader != "" {
		t.header = http.CanonicalHeaderKey(cfg.FromHeader)
	}
	if cfg.FromCookie != "" {
		t.header = ""
	}
	if cfg.Unverified {
		logger.Warn("jwt: unverified is set: token signatures are NOT checked, so keys by JWT claim are only as trustworthy as the layer in front of Caddy; never use it where clients reach Caddy directly")
	}
	return t, nil
}

// jwtVar is the request variable that holds the request's verified token,
// so that several rules keyed by its claims verify it once.
const jwtVar = "rate_limit.jwt"

// verified is the outcome of verifying a request's token.
type verified struct {
	claims jwtkey.Claims
	ok     bool
}

// String keeps the claims out of {http.vars.rate_limit.jwt}, logs and
// anything else that prints request variables.
func (*verified) String() string { return "" }

// claim is the value of the claim at path in the request's token, if the
// request has a token and it verifies.
func (t *tokens) claim(r *http.Request, path string) (string, bool) {
	if v, ok := caddyhttp.GetVar(r.Context(), jwtVar).(*verified); ok {
		if !v.ok {
			return "", false
		}
		return v.claims.Get(path)
	}
	raw, ok := t.token(r)
	if !ok {
		return "", false
	}
	v := new(verified)
	claims, err := t.verifier.Verify(raw, time.Now())
	if err != nil {
		jwtFailures.count(jwtkey.Reason(err))
	} else {
		v.claims, v.ok = claims, true
	}
	caddyhttp.SetVar(r.Context(), jwtVar, v)
	if !v.ok {
		return "", false
	}
	return claims.Get(path)
}

// token is the request's raw token.
func (t *tokens) token(r *http.Request) (string, bool) {
	if t.cookie != "" {
		c, err := r.Cookie(t.cookie)
		if err != nil || c.Value == "" {
			return "", false
		}
		return c.Value, true
	}
	vs := r.Header[t.header]
	if len(vs) == 0 {
		return "", false
	}
	if t.header == "Authorization" {
		return jwtkey.BearerToken(vs[0])
	}
	return vs[0], vs[0] != ""
}

// jwtReasons are the reasons a token fails, as jwtkey.Reason gives them:
// the only values of the metric's label ("other" last).
var jwtReasons = jwtkey.Reasons()

// failureCounts counts failed tokens by reason, process-wide, in the order
// of jwtReasons.
type failureCounts []atomic.Uint64

var jwtFailures = make(failureCounts, len(jwtReasons))

func (f failureCounts) count(reason string) {
	for i, r := range jwtReasons {
		if r == reason {
			f[i].Add(1)
			return
		}
	}
	f[len(f)-1].Add(1)
}
