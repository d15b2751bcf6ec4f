package geo

import (
	"cmp"
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
	t factors[uint16] // by codeIndex
}

// factors are factors by key (a country's codeIndex, an AS number) and a
// default: what Multipliers and ASNMultipliers share.
type factors[K cmp.Ordered] struct {
	by     map[K]float64
	def    float64
	hasDef bool
}

// defaultKey names the default factor, in either form.
const defaultKey = "default"

// For returns the factor for a request whose country is code (as Country
// returns it; either case is accepted): the country's factor, or the
// default if the country has none, if ok is false, or if code is not a
// two-letter code. For allocates nothing.
func (m Multipliers) For(code string, ok bool) float64 {
	i := stringIndex(code)
	return m.t.of(uint16(max(i, 0)), ok && i >= 0)
}

// of is k's factor if ok and k has one, else the default.
func (t factors[K]) of(k K, ok bool) float64 {
	if ok && t.by != nil {
		if f, found := t.by[k]; found {
			return f
		}
	}
	if t.hasDef {
		return t.def
	}
	return 1
}

// keyKind is what the factors of one kind of key need: reading a key and
// showing it.
type keyKind[K cmp.Ordered] struct {
	parse   func(string) (K, error)
	show    func(K) string // as Map and String give it
	noun    string         // before a key in errors: "country RU given twice"
	example string         // of the Caddyfile form, for the error on no arguments
}

// countryKeys are Multipliers' keys: countries' codeIndex.
var countryKeys = keyKind[uint16]{
	parse: func(key string) (uint16, error) {
		if !IsCountryCode(key) {
			return 0, fmt.Errorf("not an ISO 3166-1 alpha-2 country code (two letters, such as US) or %q", defaultKey)
		}
		return uint16(stringIndex(key)), nil
	},
	show:    func(i uint16) string { return codeStrings[i] },
	noun:    "country ",
	example: "expected country codes and factors, such as: RU 1.5 default 0.5",
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
	t, err := parseFactors(countryKeys, args)
	return Multipliers{t}, err
}

// parseFactors parses the Caddyfile form of factors of keys of kind.
func parseFactors[K cmp.Ordered](kind keyKind[K], args []string) (factors[K], error) {
	var b builder[K]
	b.kind = kind
	if len(args) == 0 {
		return factors[K]{}, errors.New(kind.example)
	}
	for i := 0; i < len(args); i += 2 {
		key := args[i]
		if i+1 == len(args) {
			return factors[K]{}, fmt.Errorf("argument %d %q: no factor follows", i+1, key)
		}
		if err := b.addKey(key); err != nil {
			return factors[K]{}, fmt.Errorf("argument %d %q: %w", i+1, key, err)
		}
		f, err := parseFactor(args[i+1])
		if err == nil {
			err = b.setFactor(f)
		}
		if err != nil {
			return factors[K]{}, fmt.Errorf("argument %d %q (factor for %s): %w", i+2, args[i+1], key, err)
		}
	}
	return b.t, nil
}

// FromMap makes Multipliers from the JSON and YAML form, country codes and
// the key "default" mapped to factors:
//
//	{"RU": 1.5, "US": 1.0, "default": 0.5}
//
// Keys and factors are checked as in ParseMultipliers (a code in both
// cases is given twice); an error names the key at fault. An empty or nil
// map gives the zero Multipliers.
func FromMap(m map[string]float64) (Multipliers, error) {
	t, err := factorsFromMap(countryKeys, m)
	return Multipliers{t}, err
}

// factorsFromMap reads the JSON form of factors of keys of kind.
func factorsFromMap[K cmp.Ordered](kind keyKind[K], m map[string]float64) (factors[K], error) {
	var b builder[K]
	b.kind = kind
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if err := b.addKey(key); err != nil {
			return factors[K]{}, fmt.Errorf("key %q: %w", key, err)
		}
		if err := b.setFactor(m[key]); err != nil {
			return factors[K]{}, fmt.Errorf("key %q: factor %v: %w", key, m[key], err)
		}
	}
	return b.t, nil
}

// Map returns the JSON and YAML form: upper-case codes and, if set,
// "default", mapped to their factors; nil for the zero Multipliers.
// FromMap(m.Map()) equals m.
func (m Multipliers) Map() map[string]float64 { return m.t.toMap(countryKeys) }

func (t factors[K]) toMap(kind keyKind[K]) map[string]float64 {
	if len(t.by) == 0 && !t.hasDef {
		return nil
	}
	out := make(map[string]float64, len(t.by)+1)
	for k, f := range t.by {
		out[kind.show(k)] = f
	}
	if t.hasDef {
		out[defaultKey] = t.def
	}
	return out
}

// String returns the canonical Caddyfile form: codes in upper case and
// alphabetical order, then the default if set, factors in their shortest
// form ("RU 1.5 US 1 default 0.5"); "" for the zero Multipliers.
// ParseMultipliers(strings.Fields(m.String())) equals m.
func (m Multipliers) String() string { return m.t.text(countryKeys) }

// text is the Caddyfile form, keys in their order.
func (t factors[K]) text(kind keyKind[K]) string {
	var sb strings.Builder
	pair := func(key string, f float64) {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(key + " " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	for _, k := range slices.Sorted(maps.Keys(t.by)) {
		pair(kind.show(k), t.by[k])
	}
	if t.hasDef {
		pair(defaultKey, t.def)
	}
	return sb.String()
}

// builder makes factors one key and factor at a time.
type builder[K cmp.Ordered] struct {
	kind  keyKind[K]
	t     factors[K]
	key   K
	isDef bool // the key added last is default
}

// addKey checks a key or "default" and that it is new.
func (b *builder[K]) addKey(key string) error {
	if strings.EqualFold(key, defaultKey) {
		if b.t.hasDef {
			return errors.New("default given twice")
		}
		b.t.hasDef, b.isDef = true, true
		return nil
	}
	k, err := b.kind.parse(key)
	if err != nil {
		return err
	}
	if _, dup := b.t.by[k]; dup {
		return fmt.Errorf("%s%s given twice", b.kind.noun, b.kind.show(k))
	}
	if b.t.by == nil {
		b.t.by = make(map[K]float64)
	}
	b.t.by[k] = 1 // set by setFactor
	b.key, b.isDef = k, false
	return nil
}

// setFactor checks the factor of the key added last, and sets it.
func (b *builder[K]) setFactor(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("factor is not a finite number")
	}
	if f < 0 || math.Signbit(f) {
		return errors.New("factor is negative")
	}
	if b.isDef {
		b.t.def = f
	} else {
		b.t.by[b.key] = f
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
