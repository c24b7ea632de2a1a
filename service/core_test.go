package service_test

import (
	"go/ast"
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

// The walk of a decision of admit serve, checked on the sources: every entry point reaches a
// method of the Service that calls (*Service).decide, and decide is the only code of package
// service and the transports that reaches a Store, which no transport holds.

// decideFunc is the one decision function, as funcName names it.
const decideFunc = "Service.decide"

// entryPoints are the entry points of admit serve: a function of a package, and the Service
// methods one of which it must reach.
var entryPoints = []struct {
	name, dir, fn string
}{
	{"/v1/check and forward-auth", "../transport/httpapi", "check.ServeHTTP"},
	{"/demo", "../transport/httpapi", "demo.ServeHTTP"},
	{"the proxy's routes", "../transport/httpproxy", "Proxy.ServeHTTP"},
	{"ShouldRateLimit", "../transport/rls", "Server.ShouldRateLimit"},
}

// adminMethods are the Store's methods that decide nothing — a reset and the overrides' — each
// with the one function of the Service that calls it; transports call those Service methods of
// the same names, which are not a way to a decision.
var adminMethods = map[string]string{
	"Reset":          "Service.Reset",
	"SetOverride":    "Service.SetOverride",
	"Override":       "Service.overrideOf",
	"DeleteOverride": "Service.DeleteOverride",
	"Overrides":      "Service.Overrides",
	"OverrideCount":  "Service.OverrideCounts",
}

// serviceMethods are the Service's deciding methods, each of which must call decide.
var serviceMethods = []string{"Check", "Admit", "DecideItems"}

// A source is the parsed production files of one package directory.
type source struct {
	fset  *token.FileSet
	files []*ast.File
	funcs map[string][]*ast.FuncDecl // by name, and by funcName
}

func parseDir(t *testing.T, dir string) *source {
	t.Helper()
	src := &source{fset: token.NewFileSet(), funcs: make(map[string][]*ast.FuncDecl)}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(src.fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		src.files = append(src.files, f)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				src.funcs[fd.Name.Name] = append(src.funcs[fd.Name.Name], fd)
				if n := funcName(fd); n != fd.Name.Name {
					src.funcs[n] = append(src.funcs[n], fd)
				}
			}
		}
	}
	if len(src.files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return src
}

// funcName returns fd's name, after its receiver's type and a dot for a method: "Service.decide".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// calledName returns the name of the function or method that call calls, or "".
func calledName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// admitName returns the name f imports the root package as, or "".
func admitName(f *ast.File) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/admit-dev/admit" {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "admit"
		}
	}
	return ""
}

// storeAPI returns the names of the root package's Store methods, and of its functions that take
// a Store (admit.Hold, admit.NewLimiter): the ways to reach a Store's decisions.
func storeAPI(t *testing.T) (methods, funcs []string) {
	root := parseDir(t, "..")
	for _, f := range root.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Store" {
						for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
							for _, n := range m.Names {
								methods = append(methods, n.Name)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil || !d.Name.IsExported() {
					continue
				}
				for _, p := range d.Type.Params.List {
					if id, ok := p.Type.(*ast.Ident); ok && id.Name == "Store" {
						funcs = append(funcs, d.Name.Name)
					}
				}
			}
		}
	}
	if !slices.Contains(methods, "TakeAll") || !slices.Contains(funcs, "Hold") {
		t.Fatalf("Store methods %v, functions of a Store %v: the root package's Store was not found", methods, funcs)
	}
	return methods, funcs
}

// TestOneDecisionCore walks the sources of package service and the transports: the only calls of
// a Store's deciding methods (Take, TakeAll, Release, Settle, by name, on any receiver; Reset and
// the overrides' methods only in their Service methods, adminMethods) and of the root
// functions that take a Store (admit.Hold, admit.NewLimiter) are in (*Service).decide, which
// calls TakeAll and admit.Hold; no transport names admit.Store; Check, Admit and DecideItems call
// decide; and each entry point of admit serve reaches one of them.
func TestOneDecisionCore(t *testing.T) {
	methods, funcs := storeAPI(t)
	dirs := []string{"."}
	err := filepath.WalkDir("../transport", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() != "testdata" {
			if _, mod := os.Stat(filepath.Join(p, "go.mod")); mod == nil {
				return filepath.SkipDir // a module of its own (transport/admin/uitest, a browser test): no transport of admit serve
			}
			if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
				dirs = append(dirs, p)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var inDecide []string
	for _, dir := range dirs {
		src := parseDir(t, dir)
		for _, f := range src.files {
			admit := admitName(f)
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && dir != "." && admit != "" && isIdent(sel.X, admit) && sel.Sel.Name == "Store" {
					t.Errorf("%s: a transport names admit.Store: it decides through the Service", src.fset.Position(sel.Pos()))
				}
				return true
			})
			for _, d := range f.Decls {
				fd, _ := d.(*ast.FuncDecl)
				ast.Inspect(d, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					store := slices.Contains(methods, sel.Sel.Name) ||
						admit != "" && isIdent(sel.X, admit) && slices.Contains(funcs, sel.Sel.Name)
					if !store {
						return true
					}
					if owner, ok := adminMethods[sel.Sel.Name]; ok && (dir != "." || fd != nil && funcName(fd) == owner) {
						return true // an admin operation, no decision: its Service method's, which transports call
					}
					if dir == "." && fd != nil && funcName(fd) == decideFunc {
						inDecide = append(inDecide, sel.Sel.Name)
						return true
					}
					where := "a declaration"
					if fd != nil {
						where = funcName(fd)
					}
					t.Errorf("%s: %s calls %s: only %s reaches the Store", src.fset.Position(call.Pos()), where, sel.Sel.Name, decideFunc)
					return true
				})
			}
		}
	}
	if !slices.Contains(inDecide, "TakeAll") || !slices.Contains(inDecide, "Hold") {
		t.Errorf("%s calls %v; want TakeAll and Hold among them", decideFunc, inDecide)
	}

	svc := parseDir(t, ".")
	for _, m := range serviceMethods {
		if !svc.reaches("Service."+m, func(name string) bool { return name == "decide" }) {
			t.Errorf("Service.%s does not call decide", m)
		}
	}
	for _, e := range entryPoints {
		src := parseDir(t, e.dir)
		if len(src.funcs[e.fn]) == 0 {
			t.Errorf("%s: no %s in %s", e.name, e.fn, e.dir)
			continue
		}
		if !src.reaches(e.fn, func(name string) bool { return slices.Contains(serviceMethods, name) }) {
			t.Errorf("%s: %s reaches none of the Service's %v", e.name, e.fn, serviceMethods)
		}
	}
}

// isIdent reports whether x is the identifier name.
func isIdent(x ast.Expr, name string) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Name == name
}

// reaches reports whether fn, or a function of src it calls (by name, transitively), calls a
// function or method whose name target accepts.
func (src *source) reaches(fn string, target func(string) bool) bool {
	seen := map[*ast.FuncDecl]bool{}
	queue := slices.Clone(src.funcs[fn])
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		if seen[fd] || fd.Body == nil {
			continue
		}
		seen[fd] = true
		found := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				name := calledName(call)
				if target(name) {
					found = true
				}
				queue = append(queue, src.funcs[name]...)
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}
