package integration

// A key is what the upstream reads: every spelling of one value that the
// backend takes for one value is one key (docs/reference.md, "What a key
// holds").

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// keySpellCaddyfile keys a rule per source, 3 a minute each; tokens come
// from the cookie tok.
const keySpellCaddyfile = `{
	{{.Global}}
	rate_limit {
		jwt {
			hmac_secret {env.EDGELIMIT_JWT_SECRET}
			algorithms HS256
			from_cookie tok
		}
	}
}
:{{.HTTP}} {
	rate_limit /cookie/* {
		name cookie
		limit 3 1m
		by cookie sid
	}
	rate_limit /placeholder/* {
		name placeholder
		limit 3 1m
		by {http.request.cookie.sid}
	}
	rate_limit /text/* {
		name text
		limit 3 1m
		by "{http.request.host}/{http.request.cookie.sid}"
	}
	rate_limit /header/* {
		name header
		limit 3 1m
		by header X-Key
	}
	rate_limit /query/* {
		name query
		limit 3 1m
		by query k
	}
	rate_limit /jwt/* {
		name jwt
		limit 3 1m
		by jwt sub
		on_missing_key deny
	}
	respond "ok"
}
`

// spellings are n spellings of value that a percent-decoding backend
// reads as value: each byte as it is, %XX or %xx, by the base-3 digits
// of the spelling's number (distinct for bytes whose hex has a letter).
func spellings(value string, n int) []string {
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		d := i
		for j := 0; j < len(value); j++ {
			switch d % 3 {
			case 0:
				b.WriteByte(value[j])
			case 1:
				fmt.Fprintf(&b, "%%%02X", value[j])
			case 2:
				fmt.Fprintf(&b, "%%%02x", value[j])
			}
			d /= 3
		}
		out[i] = b.String()
	}
	return out
}

// TestKeySpellings: 120 spellings of one session cookie (sid=jklmno-z,
// sid=%6Aklmno-z, sid=%6aklmno-z, sid=j%6Blmno-z, …) were 120 keys of a
// rule limited to 3 a minute: 120 served. They are one key now, by cookie,
// by its placeholder alone or inside other text: 3 served, 117 refused; and
// +, %2B and %20 are one space. A header is not decoded (no backend
// decodes one): two spellings are two keys. A query parameter is decoded,
// as it was. A token from a cookie is decoded before it is verified, and
// its claim is the JSON's value, however the issuer escaped it.
func TestKeySpellings(t *testing.T) {
	t.Parallel()
	p := startCaddy(t, keySpellCaddyfile, "EDGELIMIT_JWT_SECRET="+jwtSecret)
	sids := spellings("jklmno-z", 120)
	if n := len(slices.Compact(slices.Sorted(slices.Values(sids)))); n != 120 {
		t.Fatalf("%d distinct spellings, want 120", n)
	}
	for _, rule := range []string{"cookie", "placeholder", "text"} {
		var got []int
		for _, sid := range sids {
			got = append(got, p.status(t, "/"+rule+"/x", "Cookie", "sid="+sid))
		}
		wantStatuses(t, rule+": 120 spellings of one sid", got, seq(3, 200, 117, 429))
		var plus []int
		for _, sid := range []string{"a+b", "a%2Bb", "a%20b", "a%2bb"} {
			plus = append(plus, p.status(t, "/"+rule+"/x", "Cookie", "sid="+sid))
		}
		wantStatuses(t, rule+": sid a+b, a%2Bb, a%20b, a%2bb", plus, seq(3, 200, 1, 429))
	}

	// a header as sent: two spellings, two keys
	wantStatuses(t, "header jklmno", p.statuses(t, 4, "/header/x", "X-Key", "jklmno"), seq(3, 200, 1, 429))
	wantStatuses(t, "header %6Aklmno", p.statuses(t, 4, "/header/x", "X-Key", "%6Aklmno"), seq(3, 200, 1, 429))

	// a query parameter decoded
	var got []int
	for _, k := range spellings("jklmno", 6) {
		got = append(got, p.status(t, "/query/x?k="+k))
	}
	wantStatuses(t, "query: 6 spellings of one k", got, seq(3, 200, 3, 429))

	// a token from a cookie, percent-encoded: verified, one key
	tok := hs256(t, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	escaped := "%" + fmt.Sprintf("%02X", tok[0]) + tok[1:]
	wantStatuses(t, "tok, then tok percent-encoded", []int{
		p.status(t, "/jwt/x", "Cookie", "tok="+tok),
		p.status(t, "/jwt/x", "Cookie", "tok="+escaped),
		p.status(t, "/jwt/x", "Cookie", "tok="+escaped),
		p.status(t, "/jwt/x", "Cookie", "tok="+tok),
	}, seq(3, 200, 1, 429))
	// a claim escaped in the token's JSON is the claim: one key
	bob := rawHS256(fmt.Sprintf(`{"sub":"bob","exp":%d}`, time.Now().Add(time.Hour).Unix()))
	bobEscaped := rawHS256(fmt.Sprintf(`{"sub":"\u0062o\u0062","exp":%d}`, time.Now().Add(time.Hour).Unix()))
	wantStatuses(t, `sub "bob", then "\u0062o\u0062"`, []int{
		p.status(t, "/jwt/x", "Cookie", "tok="+bob),
		p.status(t, "/jwt/x", "Cookie", "tok="+bobEscaped),
		p.status(t, "/jwt/x", "Cookie", "tok="+bobEscaped),
		p.status(t, "/jwt/x", "Cookie", "tok="+bob),
	}, seq(3, 200, 1, 429))
}

// rawHS256 signs a payload written by hand with jwtSecret, so that its
// JSON can spell a claim as a library would not.
func rawHS256(payload string) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(jwtSecret))
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}
