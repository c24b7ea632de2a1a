package admit_test

import (
	"bytes"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The house style asks that every exported name be documented the way
// golang.org/x/time/rate documents its own, and that every package have an Example. These tests
// enforce what a parser can check; whether a comment is any good is still a reviewer's call.

// TestExportedNamesAreDocumented reports every package without a package doc comment, and every
// exported top-level func, method on an exported type, type, const and var without a doc comment.
//
// The doc comment of a func, method, type, or lone const or var must start with its name; a type's
// may start with an article ("A Limit is …"), as go doc and golint allow. In a grouped const or var
// declaration, a comment on the group or on the spec counts, and need not start with the name.
//
// Methods that implement well-known interfaces (Error, String, Unwrap, Is, ServeHTTP) get no
// exemption: on an exported type they are part of its documented API, and the tree documents them
// all without noise.
func TestExportedNamesAreDocumented(t *testing.T) {
	for _, pkg := range modulePackages(t) {
		var hasDoc bool
		for _, f := range pkg.files {
			if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
				hasDoc = true
			}
		}
		if !hasDoc {
			t.Errorf("%s: package %s has no package doc comment", pkg.position(pkg.files[0].Package), pkg.name)
		}
		for _, f := range pkg.files {
			for _, decl := range f.Decls {
				checkDecl(t, pkg, decl)
			}
		}
	}
}

// TestEveryPackageHasAnExample reports every package, other than commands (package main) and the
// packages of noExample, with no Example function in its _test.go files, and every Example with no
// "// Output:" comment: an Example that is compiled but never run cannot fail, so it is no test.
func TestEveryPackageHasAnExample(t *testing.T) {
	for _, pkg := range modulePackages(t) {
		if pkg.name == "main" {
			continue
		}
		examples := doc.Examples(pkg.testFiles...)
		for _, ex := range examples {
			if ex.Output == "" && !ex.EmptyOutput {
				t.Errorf("package %s: Example%s has no // Output: comment, so it never runs", pkg.name, ex.Name)
			}
		}
		if len(examples) == 0 && !noExample[pkg.name] {
			t.Errorf("%s: package %s has no Example function in its _test.go files", pkg.position(pkg.docFile().Package), pkg.name)
		}
	}
}

// noExample names the packages exempt from having an Example, and why.
var noExample = map[string]bool{
	// The real-Redis test harness: every function it has needs the testing.TB of a running test (to
	// skip, fail and clean up), which an Example does not have; its own tests show its use.
	"redistest": true,
}

// checkDecl reports the undocumented exported names that decl declares.
func checkDecl(t *testing.T, pkg *sourcePackage, decl ast.Decl) {
	t.Helper()
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		name := d.Name.Name
		if d.Recv != nil {
			recv := receiverType(d.Recv)
			if !token.IsExported(recv) {
				return
			}
			name = recv + "." + name
		}
		checkDoc(t, pkg, d.Name, name, d.Doc, true, false)
	case *ast.GenDecl:
		grouped := d.Lparen.IsValid()
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				doc := s.Doc
				if doc == nil {
					doc = d.Doc
				}
				checkDoc(t, pkg, s.Name, s.Name.Name, doc, true, true)
			case *ast.ValueSpec:
				doc := s.Doc
				if doc == nil {
					doc = d.Doc
				}
				for _, id := range s.Names {
					if id.IsExported() {
						checkDoc(t, pkg, id, id.Name, doc, !grouped, false)
					}
				}
			}
		}
	}
}

// checkDoc reports a missing doc comment for the name declared at id, displayed as name, and, if
// wantPrefix, one that does not start with id's name (after an article, if article).
func checkDoc(t *testing.T, pkg *sourcePackage, id *ast.Ident, name string, doc *ast.CommentGroup, wantPrefix, article bool) {
	t.Helper()
	text := ""
	if doc != nil {
		text = strings.TrimSpace(doc.Text())
	}
	switch {
	case text == "":
		t.Errorf("%s: %s: exported name has no doc comment", pkg.position(id.Pos()), name)
	case wantPrefix && !startsWithName(text, id.Name, article):
		t.Errorf("%s: %s: doc comment should start with %q", pkg.position(id.Pos()), name, id.Name)
	}
}

// startsWithName reports whether text begins with the word name, optionally after "A", "An" or
// "The" when article is set.
func startsWithName(text, name string, article bool) bool {
	if article {
		for _, a := range []string{"A ", "An ", "The "} {
			if rest, ok := strings.CutPrefix(text, a); ok && startsWithName(rest, name, false) {
				return true
			}
		}
	}
	rest, ok := strings.CutPrefix(text, name)
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}

// receiverType returns the name of the type of a method's receiver, without pointer or type
// parameters.
func receiverType(recv *ast.FieldList) string {
	if recv == nil || len(recv.List) == 0 {
		return ""
	}
	expr := recv.List[0].Type
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.ParenExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// A sourcePackage is the parsed Go files of one directory of the module.
type sourcePackage struct {
	name      string // the package clause of its non-test files
	fset      *token.FileSet
	files     []*ast.File // non-test files, with comments, sorted by name
	testFiles []*ast.File // _test.go files, of either the package or its _test package
}

// position returns pos as "file:line", the file relative to the module root.
func (p *sourcePackage) position(pos token.Pos) string {
	ps := p.fset.Position(pos)
	return filepath.ToSlash(ps.Filename) + ":" + strconv.Itoa(ps.Line)
}

// docFile returns the file holding the package doc comment, or else the first file.
func (p *sourcePackage) docFile() *ast.File {
	for _, f := range p.files {
		if f.Doc != nil {
			return f
		}
	}
	return p.files[0]
}

// modulePackages parses every package directory of the module rooted at the working directory,
// skipping testdata, directories whose names start with "." or "_" (as the go command does), and
// nested modules (directories with their own go.mod, such as bench). A directory with no non-test
// .go file is not a package and is skipped.
func modulePackages(t *testing.T) []*sourcePackage {
	t.Helper()
	fset := token.NewFileSet()
	var pkgs []*sourcePackage
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		pkg, err := parsePackage(fset, path)
		if err != nil {
			return err
		}
		if pkg != nil {
			pkgs = append(pkgs, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("found no packages: is the working directory the module root?")
	}
	return pkgs
}

// parsePackage parses the .go files of dir, or returns nil if it has no non-test .go file.
func parsePackage(fset *token.FileSet, dir string) (*sourcePackage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pkg := &sourcePackage{fset: fset}
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(name, "_test.go") {
			pkg.testFiles = append(pkg.testFiles, f)
			continue
		}
		pkg.files = append(pkg.files, f)
	}
	if len(pkg.files) == 0 {
		return nil, nil
	}
	pkg.name = pkg.files[0].Name.Name
	return pkg, nil
}

// TestLicense checks that the repository carries the Apache License 2.0 and that the README names
// it and says how to get the module and the binary.
func TestLicense(t *testing.T) {
	license, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatalf("the repository has no LICENSE: %v", err)
	}
	text := strings.Join(strings.Fields(string(license)), " ")
	for _, want := range []string{
		"Apache License Version 2.0, January 2004",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
		"END OF TERMS AND CONDITIONS",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("LICENSE is not the Apache License 2.0: it lacks %q", want)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Licence",
		"Apache License 2.0",
		"(LICENSE)",
		"go get github.com/admit-dev/admit@latest",
		"go install github.com/admit-dev/admit/cmd/admit@latest",
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}

// outsideReference matches what cites a file outside the repository: the behaviour contract, the
// house style and the failure list it was built from, and the origin design's note beside it. The
// repository stands alone: docs/guarantees.md, docs/origin-design.md and the other docs say it all.
// (Each word is spelt with a character class, so that this file does not match itself.)
var outsideReference = regexp.MustCompile(`\bSP[E]C\b|\bRELIABILIT[Y]\b|\bDESIG[N]\.md\b|\bDESIG[N]:|shared/see[d]|\.\./share[d]\b`)

// TestNoReferencesOutsideTheRepository reports every line of a file of the repository that cites
// a file the repository does not contain.
func TestNoReferencesOutsideTheRepository(t *testing.T) {
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == ".git" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil // a binary, such as a built admit
		}
		files++
		for i, line := range strings.Split(string(data), "\n") {
			if m := outsideReference.FindString(line); m != "" {
				t.Errorf("%s:%d: cites %q, which is not in the repository: %s", filepath.ToSlash(path), i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files: is the working directory the module root?", files)
	}
}

// TestErrorStringsArePlainASCII reports every string literal passed to errors.New or fmt.Errorf
// in the module's production code (its non-test files), or to the error helper of a YAML decoder
// (a method errorf or Errorf whose first parameter is a *yaml.Node, as the configuration parsers
// and internal/yamlfield have), that holds a character outside ASCII: error strings end up in
// logs, terminals and HTTP bodies of every encoding, so they spell "...", "x", "us", "-" and "<="
// rather than their typographic forms.
func TestErrorStringsArePlainASCII(t *testing.T) {
	calls, helperCalls := 0, 0
	for _, pkg := range modulePackages(t) {
		helpers := yamlErrorHelpers(pkg)
		for _, f := range pkg.files {
			errorsName, fmtName := importName(f, "errors"), importName(f, "fmt")
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, _ := sel.X.(*ast.Ident)
				what := ""
				switch {
				case x != nil && (x.Name == errorsName && sel.Sel.Name == "New" || x.Name == fmtName && sel.Sel.Name == "Errorf"):
					what = x.Name + "." + sel.Sel.Name
					calls++
				case helpers[sel.Sel.Name]:
					what = sel.Sel.Name
					helperCalls++
				default:
					return true
				}
				for _, arg := range call.Args {
					ast.Inspect(arg, func(n ast.Node) bool {
						lit, ok := n.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							return true
						}
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatalf("%s: %v", pkg.position(lit.Pos()), err)
						}
						if i := strings.IndexFunc(s, func(r rune) bool { return r > unicode.MaxASCII }); i >= 0 {
							r, _ := utf8.DecodeRuneInString(s[i:])
							t.Errorf("%s: %s string has %q (U+%04X), not plain ASCII: %s", pkg.position(lit.Pos()), what, r, r, lit.Value)
						}
						return true
					})
				}
				return true
			})
		}
	}
	if calls < 100 {
		t.Fatalf("found only %d calls of errors.New and fmt.Errorf: is the working directory the module root?", calls)
	}
	if helperCalls < 30 {
		t.Fatalf("found only %d calls of the YAML decoders' error helpers: are they still methods errorf or Errorf with a first parameter *yaml.Node?", helperCalls)
	}
}

// yamlErrorHelpers returns the names of the YAML decoders' error helpers that pkg calls: errorf and
// Errorf, if pkg declares such a method with a first parameter *yaml.Node or imports
// internal/yamlfield, whose Decoder.Errorf is one; else none.
func yamlErrorHelpers(pkg *sourcePackage) map[string]bool {
	for _, f := range pkg.files {
		if importName(f, "github.com/admit-dev/admit/internal/yamlfield") != "" {
			return map[string]bool{"errorf": true, "Errorf": true}
		}
		if importName(f, "go.yaml.in/yaml/v3") == "" {
			continue
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || (fn.Name.Name != "errorf" && fn.Name.Name != "Errorf") || len(fn.Type.Params.List) == 0 {
				continue
			}
			if star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr); ok {
				if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Node" {
					return map[string]bool{"errorf": true, "Errorf": true}
				}
			}
		}
	}
	return nil
}

// importName returns the name by which f refers to the package of the import path path, or "" if
// f does not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err == nil && p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// maxFileLines is the most lines a hand-written production Go file has: a file that grows past it
// does more than one job, and is split by job.
const maxFileLines = 600

// generatedRE matches the line that marks a generated Go file (go help generate).
var generatedRE = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestNoBigProductionFiles reports every hand-written production Go file of the module (not a
// _test.go file, not a generated one) of more than maxFileLines lines.
func TestNoBigProductionFiles(t *testing.T) {
	files := 0
	for _, pkg := range modulePackages(t) {
		for _, f := range pkg.files {
			name := filepath.ToSlash(pkg.fset.Position(f.Package).Filename)
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			files++
			if generatedRE.Match(data) {
				continue
			}
			if n := bytes.Count(data, []byte("\n")); n > maxFileLines {
				t.Errorf("%s: %d lines, more than %d: split it by job", name, n, maxFileLines)
			}
		}
	}
	if files < 100 {
		t.Fatalf("read only %d files: is the working directory the module root?", files)
	}
}

// docReference matches a comment's reference to a page of docs/ and, optionally, a heading of it:
// "docs/memstore.md#the-fast-path".
var docReference = regexp.MustCompile(`docs/([a-z0-9-]+\.md)(#[a-z0-9-]+)?`)

// TestCommentDocReferencesResolve reports every reference of a comment in the module's Go files to
// a page of docs/ that does not exist, or to a heading the page does not have, so that a comment
// that sends its reader to docs/ for the long story sends them somewhere.
func TestCommentDocReferencesResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	checked := 0
	for _, pkg := range modulePackages(t) {
		for _, f := range append(pkg.files, pkg.testFiles...) {
			for _, g := range f.Comments {
				for _, m := range docReference.FindAllStringSubmatch(g.Text(), -1) {
					page, anchor := filepath.Join("docs", m[1]), strings.TrimPrefix(m[2], "#")
					checked++
					if _, err := os.Stat(page); err != nil {
						t.Errorf("%s: %s: no such page", pkg.position(g.Pos()), m[0])
						continue
					}
					if anchor == "" {
						continue
					}
					if anchors[page] == nil {
						anchors[page] = map[string]bool{}
						for _, line := range proseLines(readFile(t, page)) {
							if heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
								anchors[page][githubAnchor(heading)] = true
							}
						}
					}
					if !anchors[page][anchor] {
						t.Errorf("%s: %s: %s has no heading with that anchor", pkg.position(g.Pos()), m[0], page)
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("found only %d references to docs/ in comments: is the working directory the module root?", checked)
	}
}

// maxCommentLines is the most lines of one comment block in production code. A doc comment says
// what a name is, how to use it and its key guarantee; the reasoning behind it goes to docs/, with
// a reference ("docs/memstore.md#reclaim") in the comment.
const maxCommentLines = 21

// TestNoCommentEssays reports every comment block of more than maxCommentLines lines in the
// module's production Go files.
func TestNoCommentEssays(t *testing.T) {
	blocks := 0
	for _, pkg := range modulePackages(t) {
		for _, f := range pkg.files {
			for _, g := range f.Comments {
				blocks++
				start, end := pkg.fset.Position(g.Pos()), pkg.fset.Position(g.End())
				if n := end.Line - start.Line + 1; n > maxCommentLines {
					t.Errorf("%s: a comment of %d lines, more than %d: keep what, how to use and the key guarantee, and move the reasoning to docs/", pkg.position(g.Pos()), n, maxCommentLines)
				}
			}
		}
	}
	if blocks < 1000 {
		t.Fatalf("found only %d comment blocks: is the working directory the module root?", blocks)
	}
}

// maxRootNames bounds the exported names of package admit, methods on its exported types counted:
// a small root is easier to learn and to keep even. Lower it when a name goes; never raise it
// without a reason in the commit.
const maxRootNames = 45

// TestRootAPIIsSmall counts the exported top-level names of package admit (types, funcs, consts and
// vars) and the exported methods of its exported types, and fails when there are more than
// maxRootNames.
func TestRootAPIIsSmall(t *testing.T) {
	var root *sourcePackage
	for _, pkg := range modulePackages(t) {
		if pkg.name == "admit" {
			root = pkg
		}
	}
	if root == nil {
		t.Fatal("found no package admit")
	}
	names := rootNames(root)
	if len(names) > maxRootNames {
		t.Errorf("package admit exports %d names, methods counted; at most %d:\n%s", len(names), maxRootNames, strings.Join(names, "\n"))
	}
	t.Logf("package admit exports %d names, methods counted", len(names))
}

// rootNames returns the exported top-level names of pkg, and its exported types' exported methods
// as Type.Method.
func rootNames(pkg *sourcePackage) []string {
	var names []string
	for _, f := range pkg.files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				switch {
				case !d.Name.IsExported():
				case d.Recv == nil:
					names = append(names, d.Name.Name)
				case token.IsExported(receiverType(d.Recv)):
					names = append(names, receiverType(d.Recv)+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.IsExported() {
								names = append(names, id.Name)
							}
						}
					}
				}
			}
		}
	}
	return names
}

// TestRootNamesCountsEveryKind checks rootNames on a package of every kind of declaration, so that
// TestRootAPIIsSmall cannot pass by counting nothing.
func TestRootNamesCountsEveryKind(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", `package x
type T struct{}
type u struct{}
func (T) M()    {}
func (*T) N()   {}
func (T) m()    {}
func (u) M()    {}
func F()        {}
func g()        {}
const C, d = 1, 2
var V, w = 1, 2
const (
	E = iota
	f
)
`, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rootNames(&sourcePackage{fset: fset, files: []*ast.File{f}}), " ")
	if want := "T T.M T.N F C V E"; got != want {
		t.Errorf("rootNames = %q; want %q", got, want)
	}
}
