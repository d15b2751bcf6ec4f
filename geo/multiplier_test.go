package geo

import (
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseMultipliers(t *testing.T) {
	for i, tc := range []struct {
		args string
		want map[string]float64 // nil: want an error
		err  string             // in the error
	}{
		// valid
		{"RU 1.5 US 1.0 default 0.5", map[string]float64{"RU": 1.5, "US": 1, "default": 0.5}, ""},
		{"ru 1.5 Us 1 DEFAULT 0.5", map[string]float64{"RU": 1.5, "US": 1, "default": 0.5}, ""},
		{"default 0.5 RU 1.5", map[string]float64{"RU": 1.5, "default": 0.5}, ""},
		{"RU 0", map[string]float64{"RU": 0}, ""},
		{"default 0", map[string]float64{"default": 0}, ""},
		{"CN 2 KP 0 XK 3", map[string]float64{"CN": 2, "KP": 0, "XK": 3}, ""},
		{"GB .5 DE 5. FR 1e2 IT 1.5E-1 ES +2", map[string]float64{"GB": 0.5, "DE": 5, "FR": 100, "IT": 0.15, "ES": 2}, ""},
		{"US 1e-400", map[string]float64{"US": 0}, ""}, // underflows to 0
		{"US 123456789", map[string]float64{"US": 123456789}, ""},
		// no arguments, or a factor missing
		{"", nil, "expected country codes and factors"},
		{"RU", nil, `argument 1 "RU": no factor follows`},
		{"RU 1.5 US", nil, `argument 3 "US": no factor follows`},
		{"RU 1.5 default", nil, `argument 3 "default": no factor follows`},
		// bad codes
		{"XX 1", nil, `argument 1 "XX": not an ISO 3166-1 alpha-2 country code`},
		{"USA 1", nil, `argument 1 "USA": not an ISO 3166-1 alpha-2`},
		{"RU 1 u1 2", nil, `argument 3 "u1": not an ISO 3166-1 alpha-2`},
		{"U 1", nil, `argument 1 "U"`},
		{"EU 1", nil, `argument 1 "EU"`},    // a continent, not a country
		{"UK 1", nil, `argument 1 "UK"`},    // reserved; GB is the code
		{"SU 1", nil, `argument 1 "SU"`},    // withdrawn
		{"ÜS 1", nil, `argument 1 "ÜS"`},    // not ASCII
		{"1.5 RU", nil, `argument 1 "1.5"`}, // the pair the wrong way round
		{"defaults 1", nil, `argument 1 "defaults"`},
		// bad factors
		{"RU -1", nil, `argument 2 "-1" (factor for RU): factor is negative`},
		{"RU -0", nil, `argument 2 "-0" (factor for RU): factor is negative`},
		{"default -0.5", nil, `argument 2 "-0.5" (factor for default): factor is negative`},
		{"RU NaN", nil, `argument 2 "NaN" (factor for RU): not a decimal number`},
		{"RU Inf", nil, `argument 2 "Inf" (factor for RU): not a decimal number`},
		{"RU +Inf", nil, `argument 2 "+Inf"`},
		{"RU infinity", nil, `argument 2 "infinity"`},
		{"RU 1e999", nil, `argument 2 "1e999" (factor for RU): factor is not a finite number`},
		{"RU abc", nil, `argument 2 "abc" (factor for RU): not a decimal number`},
		{"RU 1.5 US 1,5", nil, `argument 4 "1,5" (factor for US): not a decimal number`},
		{"RU 0x10", nil, `argument 2 "0x10"`},
		{"RU 1_0", nil, `argument 2 "1_0"`},
		{"RU 1.2.3", nil, `argument 2 "1.2.3"`},
		{"RU e", nil, `argument 2 "e"`},
		{"RU 50%", nil, `argument 2 "50%"`},
		// duplicates, in any case
		{"RU 1 RU 2", nil, `argument 3 "RU": country RU given twice`},
		{"RU 1 US 1 ru 2", nil, `argument 5 "ru": country RU given twice`},
		{"default 1 DEFAULT 2", nil, `argument 3 "DEFAULT": default given twice`},
	} {
		m, err := ParseMultipliers(strings.Fields(tc.args))
		if tc.want == nil {
			if err == nil {
				t.Errorf("Test %d: ParseMultipliers(%q) = %v; want an error", i, tc.args, m)
			} else if !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Test %d: ParseMultipliers(%q): error %q; want it to contain %q", i, tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Test %d: ParseMultipliers(%q): %v", i, tc.args, err)
			continue
		}
		if got := m.Map(); !maps.Equal(got, tc.want) {
			t.Errorf("Test %d: ParseMultipliers(%q) = %v; want %v", i, tc.args, got, tc.want)
		}
	}
}

func TestFromMap(t *testing.T) {
	for i, tc := range []struct {
		in   map[string]float64
		want string // String(), if no error
		err  string // in the error
	}{
		{map[string]float64{"RU": 1.5, "US": 1.0, "default": 0.5}, "RU 1.5 US 1 default 0.5", ""},
		{map[string]float64{"ru": 1.5, "Default": 0.5}, "RU 1.5 default 0.5", ""},
		{map[string]float64{"KP": 0}, "KP 0", ""},
		{map[string]float64{}, "", ""},
		{nil, "", ""},
		{map[string]float64{"XX": 1}, "", `key "XX": not an ISO 3166-1 alpha-2 country code`},
		{map[string]float64{"RUS": 1}, "", `key "RUS"`},
		{map[string]float64{"RU": -1}, "", `key "RU": factor -1: factor is negative`},
		{map[string]float64{"RU": math.Copysign(0, -1)}, "", `key "RU": factor -0: factor is negative`},
		{map[string]float64{"RU": math.NaN()}, "", `key "RU": factor NaN: factor is not a finite number`},
		{map[string]float64{"default": math.Inf(1)}, "", `key "default": factor +Inf: factor is not a finite number`},
		{map[string]float64{"RU": 1, "ru": 2}, "", `key "ru": country RU given twice`},
		{map[string]float64{"DEFAULT": 1, "default": 2}, "", `key "default": default given twice`},
	} {
		m, err := FromMap(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Test %d: FromMap(%v): error %v; want one containing %q", i, tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Test %d: FromMap(%v): %v", i, tc.in, err)
		} else if got := m.String(); got != tc.want {
			t.Errorf("Test %d: FromMap(%v).String() = %q; want %q", i, tc.in, got, tc.want)
		}
	}
}

func TestMultipliersFor(t *testing.T) {
	m, err := ParseMultipliers(strings.Fields("RU 1.5 US 1.0 KP 0 default 0.5"))
	if err != nil {
		t.Fatal(err)
	}
	noDefault, err := ParseMultipliers(strings.Fields("RU 2"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		m    Multipliers
		code string
		ok   bool
		want float64
	}{
		{m, "RU", true, 1.5},
		{m, "ru", true, 1.5},
		{m, "US", true, 1},
		{m, "KP", true, 0},
		{m, "DE", true, 0.5},  // no factor: the default
		{m, "EU", true, 0.5},  // not a country
		{m, "RUS", true, 0.5}, // not a code
		{m, "", true, 0.5},
		{m, "RU", false, 0.5}, // unknown country: the default, whatever code says
		{m, "", false, 0.5},
		{noDefault, "RU", true, 2},
		{noDefault, "DE", true, 1}, // the default's default
		{noDefault, "", false, 1},
		{Multipliers{}, "RU", true, 1}, // the zero value
		{Multipliers{}, "", false, 1},
	} {
		if got := tc.m.For(tc.code, tc.ok); got != tc.want {
			t.Errorf("Test %d: %v For(%q, %v) = %v; want %v", i, tc.m, tc.code, tc.ok, got, tc.want)
		}
	}
}

func TestMultipliersForAllocs(t *testing.T) {
	m, err := ParseMultipliers(strings.Fields("RU 1.5 US 1.0 default 0.5"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"RU", "de", "", "RUS"} {
		if n := testing.AllocsPerRun(100, func() { m.For(code, true) }); n != 0 {
			t.Errorf("For(%q): %v allocations; want 0", code, n)
		}
	}
}

// String, Map, ParseMultipliers and FromMap agree: each form parses back
// to the same Multipliers.
func TestMultipliersRoundTrip(t *testing.T) {
	for i, args := range []string{
		"RU 1.5 US 1.0 default 0.5",
		"zw 3 AD 0.25 default 1e+21",
		"default 0",
		"KP 0 CN 0.001 XK 7",
	} {
		m, err := ParseMultipliers(strings.Fields(args))
		if err != nil {
			t.Fatalf("Test %d: %v", i, err)
		}
		again, err := ParseMultipliers(strings.Fields(m.String()))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Errorf("Test %d: ParseMultipliers(%q) = %v, %v; want %v", i, m.String(), again, err, m)
		}
		fromMap, err := FromMap(m.Map())
		if err != nil || !reflect.DeepEqual(fromMap, m) {
			t.Errorf("Test %d: FromMap(%v) = %v, %v; want %v", i, m.Map(), fromMap, err, m)
		}
	}
	if s := (Multipliers{}).String(); s != "" {
		t.Errorf("zero String() = %q; want \"\"", s)
	}
	if mp := (Multipliers{}).Map(); mp != nil {
		t.Errorf("zero Map() = %v; want nil", mp)
	}
}

func TestMultipliersString(t *testing.T) {
	m, err := ParseMultipliers(strings.Fields("us 1.0 default 0.50 ru 1.5 AD 2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "AD 2 RU 1.5 US 1 default 0.5"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}
