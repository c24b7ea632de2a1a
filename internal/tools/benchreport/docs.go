package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// readDocs reads, from the _test.go files of every package in gs, the first paragraph of each
// benchmark function's doc comment, so that BENCHMARKS.md says what each row measures in the words
// of the code that measures it. A package whose directory is not under root (or not there) has none.
func readDocs(root string, gs []*group) (docs, error) {
	d := docs{}
	for _, g := range gs {
		if _, done := d[g.pkg]; done {
			continue
		}
		d[g.pkg] = map[string]string{}
		dir := filepath.Join(root, filepath.FromSlash(g.pkg))
		if strings.Contains(g.pkg, ".") { // not inside the module: an import path of elsewhere
			continue
		}
		if g.pkg == filepath.Base(root) || !isDir(dir) {
			dir = root // the module's root package
		}
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			return nil, err
		}
		for _, name := range files {
			if err := benchmarkDocs(name, d[g.pkg]); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// benchmarkDocs adds the first paragraph of the doc comment of each Benchmark function in one file
// to into, joined into one line.
func benchmarkDocs(filename string, into map[string]string) error {
	f, err := parser.ParseFile(token.NewFileSet(), filename, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Doc == nil || !strings.HasPrefix(fn.Name.Name, "Benchmark") {
			continue
		}
		into[fn.Name.Name] = firstParagraph(fn.Doc.Text())
	}
	return nil
}

// firstParagraph returns the first paragraph of a doc comment on one line. A paragraph that ends by
// introducing what follows it ("… quote it:", then a command) loses that last sentence.
func firstParagraph(text string) string {
	para, _, _ := strings.Cut(strings.TrimSpace(text), "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	if strings.HasSuffix(para, ":") {
		if i := strings.LastIndex(para, ". "); i >= 0 {
			para = para[:i+1]
		}
	}
	return para
}
