package ruleconfig

import "testing"

func TestStatusSet(t *testing.T) {
	s, err := ParseStatuses([]string{"401", "5xx"})
	if err != nil {
		t.Fatal(err)
	}
	for code, want := range map[int]bool{99: false, 100: false, 400: false, 401: true, 402: false, 499: false, 500: true, 563: true, 599: true, 600: false, 0: false} {
		if s.Has(code) != want {
			t.Errorf("has(%d) = %v, want %v", code, !want, want)
		}
	}
}
