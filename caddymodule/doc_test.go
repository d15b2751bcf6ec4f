package caddymodule_test

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocNamesEveryFile keeps doc.go the package's map: its package
// comment names every non-test .go file of the package, by its full name
// (a glob such as metrics*.go does not count: a reader searching for a
// file's name must find it).
func TestDocNamesEveryFile(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("doc.go has no package comment")
	}
	doc := f.Doc.Text()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "doc.go" {
			continue
		}
		files++
		// The name as a word: store.go is not named by concurrency_store.go.
		if !regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(name) + `\b`).MatchString(doc) {
			t.Errorf("doc.go does not name %s", name)
		}
	}
	if files == 0 {
		t.Fatal("no .go file beside doc.go: the test runs in the wrong directory")
	}
}
