package admit_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The module's import graph points inward: the root package stands on the standard library and on
// internal leaves that stand on nothing else (its bounds, slot arithmetic and error kinds),
// the packages that decide (policy, service, guard, the Stores) never reach up to the HTTP and
// gRPC layers that serve them, and a transport never leans on another. TestImportGraph lists the
// imports of every production package of the module and fails on any edge that a rule forbids.

// module is the path of this module.
const module = "github.com/admit-dev/admit"

// An importRule forbids an edge: no production package matching From may import a package
// matching To. A pattern is a package path within the module ("" for the root package), or one
// ending in "/..." for a package and all below it; "leaf!" matches every package outside the
// standard library but the module's internal leaves: packages under internal/ whose own imports are
// the standard library and such leaves only.
type importRule struct {
	from, to string
	why      string
}

// importRules are the edges that must never be.
var importRules = []importRule{
	{"", "leaf!", "the root package uses the standard library and internal leaves (which import nothing else) only"},
	{"policy/...", "httplimit/...", "configuration does not depend on HTTP middleware: client-IP construction is httplimit's, from the settings"},
	{"policy/...", "service/...", "configuration is below the service that loads it"},
	{"policy/...", "transport/...", "configuration is below the transports"},
	{"transport/rls/...", "httplimit/...", "Envoy's rate limit service is no HTTP middleware"},
	{"guard/...", "service/...", "fail-open receives its local limits from the reload path; it never calls back up"},
	{"guard/...", "policy/...", "guard's decorators know Limits, not configurations"},
	{"guard/...", "transport/...", "a Store decorator is below the transports"},
	{"service/...", "transport/...", "the decision core is below the transports that call it"},
	{"service/...", "httplimit/...", "the decision core answers no HTTP"},
	{"service/...", "guard/...", "the service decides on whatever Store it is given"},
	{"httplimit/...", "service/...", "the middleware is built on admit.Limiter, not on the daemon's service"},
	{"httplimit/...", "policy/...", "the middleware knows no configuration file"},
	{"httplimit/...", "transport/...", "the middleware is below the transports"},
	{"memstore/...", "guard/...", "a Store is below its decorators"},
	{"redisstore/...", "guard/...", "a Store is below its decorators"},
	{"transport/httpapi/...", "transport/httpproxy/...", "transports stand side by side"},
	{"transport/httpapi/...", "transport/rls/...", "transports stand side by side"},
	{"transport/httpproxy/...", "transport/httpapi/...", "transports stand side by side"},
	{"transport/httpproxy/...", "transport/rls/...", "transports stand side by side"},
	{"transport/rls/...", "transport/httpapi/...", "transports stand side by side"},
	{"transport/rls/...", "transport/httpproxy/...", "transports stand side by side"},
	{"transport/admin/...", "transport/httpapi/...", "transports stand side by side"},
	{"transport/admin/...", "transport/httpproxy/...", "transports stand side by side"},
	{"transport/admin/...", "transport/rls/...", "transports stand side by side"},
	{"transport/httpapi/...", "transport/admin/...", "transports stand side by side: the data plane knows nothing of the admin API"},
	{"transport/httpproxy/...", "transport/admin/...", "transports stand side by side: the data plane knows nothing of the admin API"},
	{"transport/rls/...", "transport/admin/...", "transports stand side by side: the data plane knows nothing of the admin API"},
	{"transport/rlqs/...", "transport/rls/...", "transports stand side by side"},
	{"transport/rlqs/...", "transport/httpapi/...", "transports stand side by side"},
	{"transport/rlqs/...", "transport/httpproxy/...", "transports stand side by side"},
	{"transport/rlqs/...", "transport/admin/...", "transports stand side by side: the data plane knows nothing of the admin API"},
	{"transport/rlqs/...", "httplimit/...", "Envoy's quota service is no HTTP middleware"},
	{"transport/rlqs/...", "redisstore/...", "the quota service records demand through its Ledger, whatever holds it"},
	{"transport/rls/...", "transport/rlqs/...", "transports stand side by side"},
	{"transport/httpapi/...", "transport/rlqs/...", "transports stand side by side"},
	{"transport/httpproxy/...", "transport/rlqs/...", "transports stand side by side"},
	{"transport/admin/...", "transport/rlqs/...", "transports stand side by side"},
	{"redisstore/...", "transport/...", "a Store is below the transports"},
	{"!cmd/...", "cmd/...", "only the binary wires itself"},
}

// TestImportGraph checks every production package of the module against importRules.
func TestImportGraph(t *testing.T) {
	graph, err := importGraph(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"", "service", "transport/rls", "transport/httpapi", "transport/httpproxy", "transport/admin", "transport/rlqs", "httplimit", "policy", "guard"} {
		if _, ok := graph[pkg]; !ok {
			t.Errorf("package %q not found: the graph is not the module's", pkg)
		}
	}
	for _, v := range brokenRules(graph, importRules) {
		t.Error(v)
	}
}

// TestImportGraphFindsBrokenRules checks the checker on a copy of a house with forbidden edges: a
// root package that imports a third-party package, an internal package that imports one (directly
// or through another internal package) and a package outside internal/ (but not an internal leaf,
// which it may), a configuration package that imports the middleware, and a Store decorator that
// calls back up into the service.
func TestImportGraphFindsBrokenRules(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                "module " + module + "\n",
		"admit.go":              "package admit\n\nimport (\n\t\"context\"\n\t\"github.com/redis/rueidis\"\n)\n",
		"bound.go":              "package admit\n\nimport (\n\t\"github.com/admit-dev/admit/internal/leaf\"\n\t\"github.com/admit-dev/admit/internal/notleaf\"\n\t\"github.com/admit-dev/admit/internal/deep\"\n\t\"github.com/admit-dev/admit/memstore\"\n)\n",
		"internal/leaf/l.go":    "package leaf\n\nimport \"time\"\n",
		"internal/notleaf/n.go": "package notleaf\n\nimport \"github.com/redis/rueidis\"\n",
		"internal/deep/d.go":    "package deep\n\nimport \"github.com/admit-dev/admit/internal/notleaf\"\n",
		"memstore/m.go":         "package memstore\n\nimport \"strings\"\n",
		"policy/policy.go":      "package policy\n\nimport \"github.com/admit-dev/admit/httplimit\"\n",
		"policy/p_test.go":      "package policy\n\nimport \"github.com/admit-dev/admit/transport/rls\"\n", // a test: not production
		"guard/failopen.go":     "package guard\n\nimport (\n\tsvc \"github.com/admit-dev/admit/service\"\n\t\"github.com/admit-dev/admit\"\n)\n",
		"httplimit/h.go":        "package httplimit\n\nimport \"net/http\"\n",
		"service/service.go":    "package service\n\nimport \"github.com/admit-dev/admit\"\n",
		"cmd/admit/main.go":     "package main\n\nimport \"github.com/admit-dev/admit/transport/rls\"\n",
		"transport/rls/rls.go":  "package rls\n",
	}
	for name, text := range files {
		file := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	graph, err := importGraph(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := brokenRules(graph, importRules)
	want := []string{
		`"" imports ` + module + `/internal/deep: the root package uses the standard library and internal leaves (which import nothing else) only`,
		`"" imports ` + module + `/internal/notleaf: the root package uses the standard library and internal leaves (which import nothing else) only`,
		`"" imports ` + module + `/memstore: the root package uses the standard library and internal leaves (which import nothing else) only`,
		`"" imports github.com/redis/rueidis: the root package uses the standard library and internal leaves (which import nothing else) only`,
		`"guard" imports ` + module + `/service: fail-open receives its local limits from the reload path; it never calls back up`,
		`"policy" imports ` + module + `/httplimit: configuration does not depend on HTTP middleware: client-IP construction is httplimit's, from the settings`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken rules of the copy:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// importGraph returns the imports of each production package of the module rooted at dir, by its
// path within the module ("" for the root): the import paths of its files that are not tests,
// sorted. Folders named testdata, and those starting with '.' or '_', are not packages of it.
func importGraph(dir string) (map[string][]string, error) {
	graph := make(map[string][]string)
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(file string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if file != dir && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(file))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = ""
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if !slices.Contains(graph[pkg], p) {
				graph[pkg] = append(graph[pkg], p)
			}
		}
		if _, ok := graph[pkg]; !ok {
			graph[pkg] = nil // a package that imports nothing is one too
		}
		return nil
	})
	for pkg := range graph {
		slices.Sort(graph[pkg])
	}
	return graph, err
}

// brokenRules returns a line for each edge of graph that one of rules forbids, sorted.
func brokenRules(graph map[string][]string, rules []importRule) []string {
	var out []string
	for pkg, imports := range graph {
		for _, imp := range imports {
			for _, r := range rules {
				if matchPackage(r.from, pkg) && matchImport(graph, r.to, imp) {
					out = append(out, fmt.Sprintf("%q imports %s: %s", pkg, imp, r.why))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// matchPackage reports whether pkg, a path within the module, matches pattern; a pattern starting
// with '!' matches every package the rest does not.
func matchPackage(pattern, pkg string) bool {
	if rest, ok := strings.CutPrefix(pattern, "!"); ok {
		return !matchPackage(rest, pkg)
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// matchImport reports whether the import path imp matches pattern: "leaf!" for a package outside
// the standard library that is no internal leaf of the module in graph, else a pattern of
// matchPackage for a package of the module.
func matchImport(graph map[string][]string, pattern, imp string) bool {
	if pattern == "leaf!" {
		return !isStd(imp) && !isLeaf(graph, imp, 0)
	}
	if imp == module {
		return matchPackage(pattern, "")
	}
	rel, ok := strings.CutPrefix(imp, module+"/")
	return ok && matchPackage(pattern, rel)
}

// isStd reports whether the import path imp is of the standard library: its first element has no dot.
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// isLeaf reports whether the import path imp is a package under the module's internal/ whose imports
// in graph are the standard library and such leaves only; depth stops a cycle (Go has none).
func isLeaf(graph map[string][]string, imp string, depth int) bool {
	rel, ok := strings.CutPrefix(imp, module+"/")
	imports, known := graph[rel]
	if !ok || !known || !matchPackage("internal/...", rel) || depth > len(graph) {
		return false
	}
	for _, i := range imports {
		if !isStd(i) && !isLeaf(graph, i, depth+1) {
			return false
		}
	}
	return true
}
