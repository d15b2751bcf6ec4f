package geo

import (
	"slices"
	"strings"
	"testing"
)

func TestCountryCodes(t *testing.T) {
	n := 0
	for i := range numCodes {
		if assigned[i] {
			n++
		}
	}
	if n != 250 { // 249 assigned, and XK
		t.Errorf("%d codes; want 250", n)
	}
	if codes := strings.Fields(assignedCodes); !slices.IsSorted(codes) {
		t.Error("assignedCodes is not sorted")
	}
	for i, tc := range []struct {
		code string
		want bool
	}{
		{"US", true}, {"us", true}, {"uS", true}, {"RU", true}, {"AD", true}, {"ZW", true},
		{"XK", true}, {"GB", true}, {"SS", true}, {"BQ", true},
		{"UK", false}, {"EU", false}, {"XX", false}, {"SU", false}, {"YU", false}, {"AN", false},
		{"ZZ", false}, {"AA", false}, {"A", false}, {"USA", false}, {"", false}, {"u1", false},
		{"U\x00", false}, {"@A", false}, {"[A", false}, {"`a", false}, {"{a", false}, {"\xc1S", false},
	} {
		if got := IsCountryCode(tc.code); got != tc.want {
			t.Errorf("Test %d: IsCountryCode(%q) = %v; want %v", i, tc.code, got, tc.want)
		}
	}
}

func TestCodeStrings(t *testing.T) {
	for i, s := range codeStrings {
		if stringIndex(s) != i || s != strings.ToUpper(s) {
			t.Errorf("codeStrings[%d] = %q", i, s)
		}
		if stringIndex(strings.ToLower(s)) != i {
			t.Errorf("stringIndex(%q) != %d", strings.ToLower(s), i)
		}
	}
}
