package jwtkey_test

import (
	"testing"

	"github.com/edgebyte/edgelimit/jwtkey"
)

func TestBearerToken(t *testing.T) {
	for i, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer xyz", "xyz", true},
		{"BEARER xyz", "xyz", true},
		{"BeArEr xyz", "xyz", true},
		{"  Bearer   xyz  ", "xyz", true},
		{"\tBearer\txyz\t", "xyz", true},
		{"Bearer a-b_c~d+e/f.g==", "a-b_c~d+e/f.g==", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Bearerxyz", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer a b", "", false},
		{"Bearer a,b", "", false},
		{"Bearer =abc", "", false},
		{"Bearer ab=c", "", false},
		{"Bearer \"abc\"", "", false},
		{"Bearer\nabc", "", false},
		{"Bearer ab\x00c", "", false},
		{"Bearer abcé", "", false},
		{"Bėarer abc", "", false},
		{"xyz", "", false},
		{"", "", false},
	} {
		got, ok := jwtkey.BearerToken(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Test %d: BearerToken(%q) = %q, %v; want %q, %v", i, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
