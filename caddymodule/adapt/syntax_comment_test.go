package adapt

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgebyte/edgelimit/caddymodule/rulesyntax"
)

// TestSyntaxCommentMatchesGrammar checks the syntax in parseDirective's
// comment against what the parser reads: its subdirectives are exactly
// rulesyntax's rule subdirectives and the cases of blockParser.parse, its
// zone line names exactly the cases of parseZone, and the files it names
// exist, so that the comment cannot fall behind the grammar.
func TestSyntaxCommentMatchesGrammar(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "directive.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	compat, err := parser.ParseFile(fset, "compat.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	doc := funcDecl(t, file, "parseDirective").Doc.Text()
	top, zone := commentSubdirectives(t, doc)

	want := append(rulesyntax.Subdirectives(), caseLabels(funcDecl(t, file, "parse"))...)
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(top)); !slices.Equal(got, want) {
		t.Errorf("the comment's subdirectives:\n%v\nthe parser's (rulesyntax.Subdirectives and blockParser.parse):\n%v\nmissing from the comment: %v\nnot in the parser: %v",
			got, want, minus(want, got), minus(got, want))
	}
	if wantZone := caseLabels(funcDecl(t, compat, "parseZone")); !slices.Equal(slices.Sorted(slices.Values(zone)), wantZone) {
		t.Errorf("the comment's zone subdirectives %v, parseZone's %v", zone, wantZone)
	}
	for _, name := range regexp.MustCompile(`\b[a-z_]+\.go\b`).FindAllString(doc, -1) {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("the comment names %s: %v", name, err)
		}
	}
}

// commentSubdirectives reads the syntax block of a doc comment: the first
// word of each line of the rate_limit block but comments, placeholders and
// closing braces (each once: a name twice is an error), and the names in
// the braces of its zone line.
func commentSubdirectives(t *testing.T, doc string) (top, zone []string) {
	t.Helper()
	start := strings.Index(doc, "\trate_limit [<matcher>] {\n")
	end := strings.Index(doc, "\n\t}\n")
	if start < 0 || end < start {
		t.Fatalf("no rate_limit block in the comment:\n%s", doc)
	}
	for _, line := range strings.Split(doc[start:end], "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], "<") || fields[0] == "}" {
			continue
		}
		if slices.Contains(top, fields[0]) {
			t.Errorf("the comment gives %s twice", fields[0])
		}
		top = append(top, fields[0])
		if fields[0] == "zone" {
			inner := line[strings.Index(line, "{")+1 : strings.Index(line, "}")]
			for _, name := range strings.Split(inner, ",") {
				zone = append(zone, strings.TrimSpace(name))
			}
		}
	}
	return top, zone
}

// funcDecl is the function or method name of file.
func funcDecl(t *testing.T, file *ast.File, name string) *ast.FuncDecl {
	t.Helper()
	for _, decl := range file.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == name {
			return fn
		}
	}
	t.Fatalf("no func %s", name)
	return nil
}

// caseLabels are the string constants of the case clauses of the first
// switch on sub in fn, sorted: the subdirectives it reads.
func caseLabels(fn *ast.FuncDecl) []string {
	var labels []string
	var done bool
	ast.Inspect(fn, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if done || !ok {
			return !done
		}
		if tag, ok := sw.Tag.(*ast.Ident); !ok || tag.Name != "sub" {
			return true
		}
		done = true
		for _, stmt := range sw.Body.List {
			for _, expr := range stmt.(*ast.CaseClause).List {
				if lit, ok := expr.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					labels = append(labels, s)
				}
			}
		}
		return false
	})
	slices.Sort(labels)
	return labels
}

// minus is what of a is not in b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
