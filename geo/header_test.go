package geo

import "testing"

func TestParseCountry(t *testing.T) {
	for in, want := range map[string]string{
		"US": "US", "us": "US", "rU": "RU", " de ": "DE", "XK": "XK",
		"XX": "", "T1": "", "": "", "USA": "", "U": "", "ZZ": "", "é": "", "\x00\x00": "",
	} {
		code, ok := ParseCountry(in)
		if code != want || ok != (want != "") {
			t.Errorf("ParseCountry(%q) = %q, %v; want %q, %v", in, code, ok, want, want != "")
		}
	}
	if n := testing.AllocsPerRun(100, func() { ParseCountry("us") }); n != 0 {
		t.Errorf("ParseCountry allocates %v times", n)
	}
}
