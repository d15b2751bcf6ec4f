package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/edgebyte/edgelimit"
)

// TestCaddyfileAdapt adapts each caddyfile_adapt/*.caddytest: a Caddyfile,
// a line "----------", then the JSON it must adapt to, or a line
// "ERROR: <text>" whose text the adapter's error must contain.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("caddyfile_adapt", "*.caddytest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no caddyfile_adapt/*.caddytest files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".caddytest"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, expected, ok := strings.Cut(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n----------\n")
			if !ok {
				t.Fatalf("%s: no ---------- line between the Caddyfile and the expected result", file)
			}
			input = strings.TrimSpace(input) + "\n"
			expected = strings.TrimSpace(expected)

			if wantErr, isErr := strings.CutPrefix(expected, "ERROR: "); isErr {
				_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
				if err == nil {
					t.Fatalf("adapted without error; want one containing %q", wantErr)
				}
				if !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("got error %q, want one containing %q", err, wantErr)
				}
				return
			}
			if !caddytest.CompareAdapt(t, file, input, "caddyfile", expected) {
				t.Error("the adapted config differs from the expected one")
			}
		})
	}
}
