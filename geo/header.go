package geo

import "strings"

// ParseCountry reads a country code as a trusted proxy sends it in a
// header (CF-IPCountry: us): surrounding spaces are dropped and either
// case is accepted. It returns the code in upper case, and ok=false unless
// it is an assigned country code (IsCountryCode), so values that name no
// country, such as Cloudflare's XX (unknown) and T1 (Tor), mean "unknown".
// The code returned is one of the strings Country returns, so ParseCountry
// allocates nothing.
func ParseCountry(s string) (code string, ok bool) {
	i := stringIndex(strings.TrimSpace(s))
	if i < 0 || !assigned[i] {
		return "", false
	}
	return codeStrings[i], true
}
