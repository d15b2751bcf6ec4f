package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestCaddyfilesFormatted: every example Caddyfile, and every Caddyfile
// in README.md and docs/, is what `caddy fmt` makes of it, so that Caddy
// does not warn "Caddyfile input is not formatted" when a user starts
// one.
func TestCaddyfilesFormatted(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(root, "caddyfile_examples", "*.Caddyfile"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example Caddyfiles (%v)", err)
	}
	for _, path := range examples {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(caddyfile.Format(b)); got != string(b) {
			t.Errorf("%s is not as caddy fmt writes it; run: caddy fmt --overwrite %s\n%s", filepath.Base(path), filepath.Join("caddyfile_examples", filepath.Base(path)), firstDiff(string(b), got))
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	blocks := 0
	// a fence in a list item is indented: its lines are, by as much
	block := regexp.MustCompile("(?ms)^([ \t]*)```caddyfile\n(.*?)^[ \t]*```")
	for _, path := range append(docs, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllStringSubmatch(string(b), -1) {
			blocks++
			text := unindent(m[2], m[1])
			if got := string(caddyfile.Format([]byte(text))); got != text {
				t.Errorf("a Caddyfile in %s is not as caddy fmt writes it:\n%s", filepath.Base(path), firstDiff(text, got))
			}
		}
	}
	if blocks == 0 {
		t.Error("no ```caddyfile blocks found in README.md and docs/")
	}
}

// firstDiff shows the first line where fmtd, caddy fmt's text, differs
// from have.
func firstDiff(have, fmtd string) string {
	a, b := strings.Split(have, "\n"), strings.Split(fmtd, "\n")
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d: have %q, caddy fmt: %q", i+1, a[i], b[i])
		}
	}
	return fmt.Sprintf("caddy fmt's text has %d lines, the file %d", len(b), len(a))
}

// unindent is text with indent taken off the start of each line.
func unindent(text, indent string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}
