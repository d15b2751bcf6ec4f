package geo

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Multipliers are a rule's per-country factors (geo_multiplier): a
// country's factor multiplies every limit and burst of the rule for
// requests from that country, and 0 blocks them. Countries without a
// factor, and requests whose country is unknown, get the default, which is
// 1 unless set.
//
// The zero value gives 1 to every country. A Multipliers is never changed
// once made, so it is safe for concurrent use, and copies share their
// table.
type Multipliers struct {
	factors map[uint16]float64 // by codeIndex
	def     float64
	hasDef  bool
}

// defaultKey names the default factor, in either form.
const defaultKey = "default"

// For returns the factor for a request whose country is code (as Country
// returns it; either case is accepted): the country's factor, or the
// default if the country has none, if ok is false, or if code is not a
// two-letter code. For allocates nothing.
func (m Multipliers) For(code string, ok bool) float64 {
	if ok && m.factors != nil {
		if i := stringIndex(code); i >= 0 {
			if f, found := m.factors[uint16(i)]; found {
				return f
			}
		}
	}
	if m.hasDef {
		return m.def
	}
	return 1
}

// ParseMultipliers parses the arguments of the Caddyfile form, pairs of a
// country code and a factor, or of the keyword default and a factor:
//
//	RU 1.5 US 1.0 default 0.5
//
// Codes are ISO 3166-1 alpha-2 (officially assigned, or XK), in either
// case; factors are finite decimal numbers, 0 or more. A code given twice,
// a missing factor or no arguments at all are errors; an error names the
// argument at fault by its position, counting from 1.
func ParseMultipliers(args []string) (Multipliers, error) {
	var b builder
	if len(args) == 0 {
		return Multipliers{}, errors.New("expected country codes and factors, such as: RU 1.5 default 0.5")
	}
	for i := 0; i < len(args); i += 2 {
		key := args[i]
		if i+1 == len(args) {
			return Multipliers{}, fmt.Errorf("argument %d %q: no factor follows", i+1, key)
		}
		if err := b.addKey(key); err != nil {
			return Multipliers{}, fmt.Errorf("argument %d %q: %w", i+1, key, err)
		}
		f, err := parseFactor(args[i+1])
		if err == nil {
			err = b.setFactor(f)
		}
		if err != nil {
			return Multipliers{}, fmt.Errorf("argument %d %q (factor for %s): %w", i+2, args[i+1], key, err)
		}
	}
	return b.m, nil
}

// FromMap makes Multipliers from the JSON and YAML form, country codes and
// the key "default" mapped to factors:
//
//	{"RU": 1.5, "US": 1.0, "default": 0.5}
//
// Keys and factors are checked as in ParseMultipliers (a code in both
// cases is given twice); an error names the key at fault. An empty or nil
// map gives the zero Multipliers.
func FromMap(factors map[string]float64) (Multipliers, error) {
	var b builder
	for _, key := range slices.Sorted(maps.Keys(factors)) {
		if err := b.addKey(key); err != nil {
			return Multipliers{}, fmt.Errorf("key %q: %w", key, err)
		}
		if err := b.setFactor(factors[key]); err != nil {
			return Multipliers{}, fmt.Errorf("key %q: factor %v: %w", key, factors[key], err)
		}
	}
	return b.m, nil
}

// Map returns the JSON and YAML form: upper-case codes and, if set,
// "default", mapped to their factors; nil for the zero Multipliers.
// FromMap(m.Map()) equals m.
func (m Multipliers) Map() map[string]float64 {
	if len(m.factors) == 0 && !m.hasDef {
		return nil
	}
	out := make(map[string]float64, len(m.factors)+1)
	for i, f := range m.factors {
		out[codeStrings[i]] = f
	}
	if m.hasDef {
		out[defaultKey] = m.def
	}
	return out
}

// String returns the canonical Caddyfile form: codes in upper case and
// alphabetical order, then the default if set, factors in their shortest
// form ("RU 1.5 US 1 default 0.5"); "" for the zero Multipliers.
// ParseMultipliers(strings.Fields(m.String())) equals m.
func (m Multipliers) String() string {
	var sb strings.Builder
	for _, i := range slices.Sorted(maps.Keys(m.factors)) {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(codeStrings[i])
		sb.WriteByte(' ')
		sb.WriteString(strconv.FormatFloat(m.factors[i], 'g', -1, 64))
	}
	if m.hasDef {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(defaultKey + " " + strconv.FormatFloat(m.def, 'g', -1, 64))
	}
	return sb.String()
}

// builder makes a Multipliers one key and factor at a time.
type builder struct {
	m   Multipliers
	key int // the codeIndex of the key added last, or -1 for default
}

// addKey checks a country code or "default" and that it is new.
func (b *builder) addKey(key string) error {
	if strings.EqualFold(key, defaultKey) {
		if b.m.hasDef {
			return errors.New("default given twice")
		}
		b.m.hasDef, b.key = true, -1
		return nil
	}
	if !IsCountryCode(key) {
		return fmt.Errorf("not an ISO 3166-1 alpha-2 country code (two letters, such as US) or %q", defaultKey)
	}
	i := stringIndex(key)
	if _, dup := b.m.factors[uint16(i)]; dup {
		return fmt.Errorf("country %s given twice", codeStrings[i])
	}
	if b.m.factors == nil {
		b.m.factors = make(map[uint16]float64)
	}
	b.m.factors[uint16(i)] = 1 // set by setFactor
	b.key = i
	return nil
}

// setFactor checks the factor of the key added last, and sets it.
func (b *builder) setFactor(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("factor is not a finite number")
	}
	if f < 0 || math.Signbit(f) {
		return errors.New("factor is negative")
	}
	if b.key < 0 {
		b.m.def = f
	} else {
		b.m.factors[uint16(b.key)] = f
	}
	return nil
}

// parseFactor parses a factor in decimal notation ("1", "0.5", "1.5e3"):
// not hexadecimal, nor Inf or NaN, nor with underscores.
func parseFactor(s string) (float64, error) {
	if s == "" || strings.Trim(s, "0123456789.eE+-") != "" {
		return 0, errors.New("not a decimal number")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("not a decimal number")
	}
	return f, nil // out of range: ±Inf, refused by setFactor, or 0
}
