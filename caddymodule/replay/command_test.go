package replay

import (
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	for i, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{in: ""},
		{in: "1700000000", want: time.Unix(1700000000, 0)},
		{in: "1700000000.25", want: time.Unix(1700000000, 250e6)},
		{in: "2026-12-01T00:00:00Z", want: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-12-01T01:00:00+01:00", want: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{in: "yesterday", err: true},
	} {
		got, err := parseTime(tc.in)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("Test %d: parseTime(%q) = %v, %v; want %v (error %t)", i, tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestRunRefuses: the command's errors name the flag.
func TestRunRefuses(t *testing.T) {
	for i, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Logs: []string{"a.log"}}, "--config is required"},
		{Options{Config: "Caddyfile"}, "--log is required"},
		{Options{Config: "Caddyfile", Logs: []string{"a.log"}, Format: "xml"}, `--format "xml": text or json`},
		{Options{Config: "Caddyfile", Logs: []string{"/nonexistent/a.log"}}, "no such file"},
	} {
		err := Run(tc.o, &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Test %d: %v, want an error with %q", i, err, tc.want)
		}
	}
}
