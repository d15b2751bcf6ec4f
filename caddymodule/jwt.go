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

	"github.com/edgebyte/edgelimit/caddymodule/appconfig"
	"github.com/edgebyte/edgelimit/jwtkey"
)

// tokens finds and verifies the tokens of requests for `by jwt` sources.
type tokens struct {
	verifier *jwtkey.Verifier
	header   string // canonical; "" when cookie is set
	cookie   string
}

// newTokens builds the verifier of a JWTConfig: keys are read from their
// files now, so a missing or bad key fails the config load.
func newTokens(cfg *appconfig.JWTConfig, logger *zap.Logger) (*tokens, error) {
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
		// percent-decoded, as the backend reads it: a token spelled
		// %65yJ… must verify here if it does there
		return unescape(c.Value), true
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
