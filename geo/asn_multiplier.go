package geo

import (
	"errors"
	"strconv"
	"strings"
)

// ASNMultipliers are a rule's per-network factors (asn_multiplier), as
// Multipliers are per country: an autonomous system's factor multiplies
// every limit and burst of the rule for requests from it, and 0 blocks
// them. Systems without a factor, and requests whose system is unknown,
// get the default, which is 1 unless set.
//
// The zero value gives 1 to every system. An ASNMultipliers is never
// changed once made, so it is safe for concurrent use.
type ASNMultipliers struct {
	t factors[uint32] // by AS number
}

// asnKeys are ASNMultipliers' keys: AS numbers, written "AS15169" or
// "15169".
var asnKeys = keyKind[uint32]{
	parse:   parseASN,
	show:    func(n uint32) string { return "AS" + strconv.FormatUint(uint64(n), 10) },
	example: "expected AS numbers and factors, such as: AS15169 0.5 default 1",
}

// parseASN reads an AS number: 1 to 4294967295, with or without "AS" (in
// either case) before it, in decimal.
func parseASN(key string) (uint32, error) {
	digits := key
	if len(key) > 2 && strings.EqualFold(key[:2], "AS") {
		digits = key[2:]
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n == 0 || digits[0] == '+' {
		return 0, errors.New(`not an AS number (1 to 4294967295, such as AS15169 or 15169) or "default"`)
	}
	return uint32(n), nil
}

// For returns the factor for a request whose autonomous system is as (as
// ASNDB.Lookup returns it): its factor, or the default if it has none or
// ok is false. For allocates nothing.
func (m ASNMultipliers) For(as *AS, ok bool) float64 {
	if !ok || as == nil {
		return m.t.of(0, false)
	}
	return m.t.of(as.Number, true)
}

// ParseASNMultipliers parses the arguments of the Caddyfile form, pairs
// of an AS number and a factor, or of the keyword default and a factor:
//
//	AS15169 0.5 16509 0.5 default 1
//
// Numbers are decimal, with or without AS before them; factors and errors
// are as in ParseMultipliers.
func ParseASNMultipliers(args []string) (ASNMultipliers, error) {
	t, err := parseFactors(asnKeys, args)
	return ASNMultipliers{t}, err
}

// ASNMultipliersFromMap makes ASNMultipliers from the JSON and YAML form,
// AS numbers (as ParseASNMultipliers takes them) and "default" mapped to
// factors: {"AS15169": 0.5, "default": 1}. An empty or nil map gives the
// zero ASNMultipliers.
func ASNMultipliersFromMap(m map[string]float64) (ASNMultipliers, error) {
	t, err := factorsFromMap(asnKeys, m)
	return ASNMultipliers{t}, err
}

// Map returns the JSON and YAML form: "AS15169" keys and, if set,
// "default", mapped to their factors; nil for the zero ASNMultipliers.
func (m ASNMultipliers) Map() map[string]float64 { return m.t.toMap(asnKeys) }

// String returns the canonical Caddyfile form: numbers in increasing
// order, then the default if set ("AS13238 0 AS15169 0.5 default 1").
func (m ASNMultipliers) String() string { return m.t.text(asnKeys) }
