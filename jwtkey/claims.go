package jwtkey

import (
	"encoding/json"
	"strings"
)

// MaxPathDepth is the most segments a claim path given to [Claims.Get] may
// have ("tenant.id" has two).
const MaxPathDepth = 16

// maxNumberLength bounds the text [Claims.Get] returns for a number: an
// exponent such as 1e999999 would otherwise expand to a million digits.
const maxNumberLength = 64

// Claims are the claims of a verified token. The zero value has no claims.
// Claims are read-only and safe for concurrent use: the same Claims may be
// returned for every request that carries the same token.
type Claims struct {
	m map[string]any // decoded with json.Number for numbers; never modified
}

// Get returns the claim at path as a string, for use as a key.
//
// A path is a claim name ("sub"), or names joined by dots that lead into
// nested objects ("tenant.id" reads {"tenant":{"id":…}}). A top-level claim
// whose name is exactly path is preferred, so that namespaced claims such as
// "https://example.com/tenant" can be read too. Paths with an empty segment or
// more than [MaxPathDepth] segments find nothing.
//
// Strings are returned as they are (an empty string gives "", true). Numbers
// are returned exactly, in plain decimal form without exponent, leading or
// trailing zeros: 12345678901234567890 stays as is (no float rounding), 1.50
// gives "1.5", 1e3 and 1000.0 give "1000", -0 gives "0"; a number whose form
// would be longer than 64 characters gives false. Booleans give "true" or
// "false". Objects, arrays, null and missing claims give false.
func (c Claims) Get(path string) (string, bool) {
	if c.m == nil || path == "" {
		return "", false
	}
	v, ok := c.m[path]
	if !ok {
		if !strings.Contains(path, ".") {
			return "", false
		}
		var cur any = c.m
		depth := 0
		for seg := range strings.SplitSeq(path, ".") {
			depth++
			obj, isObj := cur.(map[string]any)
			if depth > MaxPathDepth || !isObj || seg == "" {
				return "", false
			}
			if cur, ok = obj[seg]; !ok {
				return "", false
			}
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return canonicalNumber(string(v))
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// canonicalNumber rewrites a JSON number literal exactly, in plain decimal
// form: an optional "-", the integer digits without leading zeros (or "0"),
// and the fraction digits without trailing zeros after a "." if any remain.
// It returns false for text that is not a JSON number or whose form would be
// longer than maxNumberLength.
func canonicalNumber(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intEnd := digitsEnd(s, 0)
	if intEnd == 0 || (s[0] == '0' && intEnd > 1) {
		return "", false
	}
	sign := ""
	if neg {
		sign = "-"
	}
	intPart, rest := s[:intEnd], s[intEnd:]
	if rest == "" { // an integer: JSON already writes it canonically
		switch {
		case intPart == "0":
			return "0", true
		case len(sign)+len(intPart) > maxNumberLength:
			return "", false
		case neg:
			return "-" + intPart, true
		}
		return intPart, true
	}
	var frac string
	if rest[0] == '.' {
		end := digitsEnd(rest, 1)
		if end == 1 {
			return "", false
		}
		frac, rest = rest[1:end], rest[end:]
	}
	exp := 0 // the value is (intPart frac) × 10^(exp − len(frac))
	if rest != "" {
		if rest[0] != 'e' && rest[0] != 'E' {
			return "", false
		}
		rest = rest[1:]
		expNeg := false
		if rest != "" && (rest[0] == '+' || rest[0] == '-') {
			expNeg = rest[0] == '-'
			rest = rest[1:]
		}
		end := digitsEnd(rest, 0)
		if end == 0 || end != len(rest) {
			return "", false
		}
		for i := range end {
			if exp < 1<<20 { // beyond this the result is too long (or zero) anyway
				exp = exp*10 + int(rest[i]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	// Significant digits without leading or trailing zeros, and the power of
	// ten of the last one.
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	if digits == "" {
		return "0", true
	}
	switch point := len(digits) + exp; {
	case exp >= 0: // an integer: digits then exp zeros
		if len(sign)+len(digits)+exp > maxNumberLength {
			return "", false
		}
		return sign + digits + strings.Repeat("0", exp), true
	case point > 0: // digits with a point inside
		if len(sign)+len(digits)+1 > maxNumberLength {
			return "", false
		}
		return sign + digits[:point] + "." + digits[point:], true
	default: // 0.000digits
		if len(sign)+2-point+len(digits) > maxNumberLength {
			return "", false
		}
		return sign + "0." + strings.Repeat("0", -point) + digits, true
	}
}

// digitsEnd returns the index of the first byte at or after i in s that is not
// an ASCII digit.
func digitsEnd(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}
