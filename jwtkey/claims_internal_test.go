package jwtkey

import (
	"strings"
	"testing"
)

func TestCanonicalNumber(t *testing.T) {
	for i, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0", "0", true},
		{"-0", "0", true},
		{"7", "7", true},
		{"-7", "-7", true},
		{"12345678901234567890", "12345678901234567890", true},
		{"1.50", "1.5", true},
		{"1.0", "1", true},
		{"-1.0", "-1", true},
		{"0.0", "0", true},
		{"-0.0e5", "0", true},
		{"0e999999999999", "0", true},
		{"1e3", "1000", true},
		{"1E+3", "1000", true},
		{"1e-3", "0.001", true},
		{"0.001", "0.001", true},
		{"-1.25e1", "-12.5", true},
		{"123.456e1", "1234.56", true},
		{"123.456e-1", "12.3456", true},
		{"100e-2", "1", true},
		{"1200e-1", "120", true},
		{"1e63", "1" + strings.Repeat("0", 63), true},
		{"1e64", "", false},
		{"-1e62", "-1" + strings.Repeat("0", 62), true},
		{"-1e63", "", false},
		{"1e-62", "0." + strings.Repeat("0", 61) + "1", true},
		{"1e-63", "", false},
		{strings.Repeat("9", 64), strings.Repeat("9", 64), true},
		{strings.Repeat("9", 65), "", false},
		{"1e999999999999999999999", "", false},
		{"1e-999999999999999999999", "", false},
		{"", "", false},
		{"-", "", false},
		{"01", "", false},
		{"1.", "", false},
		{".5", "", false},
		{"1e", "", false},
		{"1e+", "", false},
		{"1.5x", "", false},
		{"abc", "", false},
		{"+1", "", false},
	} {
		got, ok := canonicalNumber(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Test %d: canonicalNumber(%q) = %q, %v; want %q, %v", i, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
