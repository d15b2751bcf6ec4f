// Package jwtkey verifies JSON Web Tokens (RFC 7519) and reads one claim from
// them, so that a rate-limit rule can key requests by a claim ("by jwt sub",
// "by jwt tenant.id").
//
// A token that fails verification has no key: the caller falls back to another
// key (the client IP), never to a bucket of the token's own. Otherwise anyone
// could mint an unlimited number of fresh buckets by sending made-up tokens.
//
// Use:
//
//	v, err := jwtkey.NewVerifier(jwtkey.Config{
//		PublicKeys: keys, // from ParsePEM, or JWKS from ParseJWKS
//		Algorithms: []string{"RS256"},
//		Issuer:     "https://id.example.com/",
//	})
//	…
//	tok, ok := jwtkey.BearerToken(r.Header.Get("Authorization"))
//	if ok {
//		claims, err := v.Verify(tok, time.Now())
//		if err != nil {
//			metric.WithLabelValues(jwtkey.Reason(err)).Inc()
//		} else if key, ok := claims.Get("tenant.id"); ok {
//			…
//		}
//	}
//
// What is checked, in order: the token's length (at most [MaxTokenLength]
// bytes, before any decoding); its form (three base64url segments, strictly
// decoded, JSON header and payload); its "alg" against the configured list
// ("none" is never accepted); its signature, with a key of that algorithm's
// type only (see [Config]); "exp" and "nbf" against the time passed to Verify,
// with a leeway; "iss" and "aud" when configured. "iat" is not checked: RFC
// 7519 makes it informational, and a clock a little behind the issuer's would
// otherwise refuse fresh tokens. A token without "exp" is accepted: a rate
// limit key needs to know who signed the token, not how long it may be used
// for, and a signed token without "exp" is the issuer's choice.
//
// Checking the signature of an ES256 or RS256 token costs up to a few hundred
// microseconds, so a [Verifier] remembers recently verified tokens in a small
// fixed-size cache (see [Config.CacheSize]). A cached token is still checked
// against "exp" and "nbf" on every use.
//
// The package depends on github.com/golang-jwt/jwt/v5 for parsing and for the
// signature algorithms; JWK Sets are read with the standard library only.
package jwtkey
