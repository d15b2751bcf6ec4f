package appconfig

import "github.com/caddyserver/caddy/v2"

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
