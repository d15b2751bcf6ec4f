package jwtkey

// BearerToken returns the token of an Authorization header value that uses the
// Bearer scheme (RFC 6750 §2.1): "Bearer xyz" gives "xyz". The scheme name is
// case-insensitive; spaces and tabs around the value and between the scheme
// and the token are ignored. It returns false for any other scheme, an empty
// token, or a token with characters outside the token68 syntax (letters,
// digits, "-._~+/", then trailing "=").
func BearerToken(authorization string) (string, bool) {
	const scheme = "bearer"
	s := trimSpace(authorization)
	if len(s) <= len(scheme) || !isSpace(s[len(scheme)]) {
		return "", false
	}
	for i := range len(scheme) {
		if s[i]|0x20 != scheme[i] { // ASCII lower case; no other byte folds onto a letter
			return "", false
		}
	}
	tok := trimSpace(s[len(scheme):])
	if !isToken68(tok) {
		return "", false
	}
	return tok, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// isToken68 reports whether s is 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
// "+" / "/" ) *"=" (RFC 9110 §11.2).
func isToken68(s string) bool {
	i := 0
	for i < len(s) && token68[s[i]] {
		i++
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// token68 holds the bytes of a token68 before its "=" padding.
var token68 = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/") {
		t[c] = true
	}
	return t
}()
