package layout_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// libraries are the six packages (each with its subpackages) that know
// nothing of Caddy: a program that is not a Caddy plugin can use them, and
// the Caddy modules in caddymodule are their only adapter.
var libraries = []string{"limiter", "geo", "gossip", "redisstore", "jwtkey", "topkeys"}

// caddyPrefix is where every Caddy package lives.
const caddyPrefix = "github.com/caddyserver/"

// TestLibrariesDoNotDependOnCaddy proves the house's first rule with the
// go command itself: no package that a library (or a library's tests)
// builds with, directly or through any other module, is a Caddy package. A
// failure names the package and the import chain that reaches Caddy.
func TestLibrariesDoNotDependOnCaddy(t *testing.T) {
	for _, lib := range libraries {
		pattern := module + "/" + lib + "/..."
		build := listDeps(t, pattern, false)
		if _, ok := build[module+"/"+lib]; !ok {
			t.Fatalf("%s lists no package %s/%s: the library moved and this test checks nothing", pattern, module, lib)
		}
		reported := map[string]bool{}
		for _, chain := range caddyChains(build) {
			caddy := chain[len(chain)-1]
			reported[caddy] = true
			t.Errorf("%s builds with %s: %s", chain[0], caddy, strings.Join(chain, " → "))
		}
		// The tests' run repeats what the build reaches; it reports only
		// the Caddy packages that a test alone brings in.
		for _, chain := range caddyChains(listDeps(t, pattern, true)) {
			if caddy := chain[len(chain)-1]; !reported[caddy] {
				t.Errorf("%s's tests build with %s: %s", lib, caddy, strings.Join(chain, " → "))
			}
		}
	}
}

// TestCaddyChainsFindsCaddy keeps the check above honest: run on the
// package that registers the Caddy modules, it finds Caddy and the chain
// that starts at that package.
func TestCaddyChainsFindsCaddy(t *testing.T) {
	chains := caddyChains(listDeps(t, module+"/caddymodule", false))
	if len(chains) == 0 {
		t.Fatal("no chain from caddymodule to Caddy: the dependency check is blind")
	}
	for _, c := range chains {
		if c[0] != module+"/caddymodule" || !strings.HasPrefix(c[len(c)-1], caddyPrefix) {
			t.Fatalf("chain %v does not run from caddymodule to a Caddy package", c)
		}
	}
}

// module is this repository's module path.
const module = "github.com/edgebyte/edgelimit"

// listDeps runs `go list -deps` (with -test when tests is set) on pattern
// and returns each listed package with its direct imports, test builds
// of a package included.
func listDeps(t *testing.T, pattern string, tests bool) map[string][]string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \",\"}}"}
	if tests {
		args = append(args, "-test")
	}
	cmd := exec.Command(goBinary(t), append(args, pattern)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// A test's build of a package is listed as "path [path.test]":
		// the space is in the name, a comma never is.
		path, imports, _ := strings.Cut(sc.Text(), "\t")
		deps[path] = strings.FieldsFunc(imports, func(r rune) bool { return r == ',' })
	}
	return deps
}

// caddyChains returns, for each Caddy package in deps, one shortest import
// chain that reaches it from a package of this module nothing else in deps
// imports (the packages the pattern named): root first, Caddy package last.
func caddyChains(deps map[string][]string) [][]string {
	imported := map[string]bool{}
	for _, imports := range deps {
		for _, p := range imports {
			imported[p] = true
		}
	}
	var queue []string
	from := map[string]string{}
	for p := range deps {
		if !imported[p] && strings.HasPrefix(p, module) {
			queue = append(queue, p)
			from[p] = ""
		}
	}
	var chains [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if strings.HasPrefix(p, caddyPrefix) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append([]string{q}, chain...)
			}
			chains = append(chains, chain)
			continue
		}
		for _, q := range deps[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return chains
}

// goBinary is the go command of the toolchain running the test, or the
// one on PATH.
func goBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err == nil {
		return p
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	return p
}
