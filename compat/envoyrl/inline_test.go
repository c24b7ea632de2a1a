package envoyrl

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/envoyproxy/ratelimit/src/config"
	"gopkg.in/yaml.v2"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// inlineSource is the file of envoyproxy/ratelimit's module whose tests configure its loader with
// config.YamlRoot literals rather than files.
const inlineSource = "test/config/config_test.go"

// inlineFixtures returns the config.YamlRoot literals of envoyproxy/ratelimit's inlineSource, each as
// a fixture of one file: the literal evaluated as data (evalLiteral: the file is parsed, never
// compiled or copied) and written as the YAML a person would write for it (toYAML), which
// envoyproxy/ratelimit's own loader must read back into the same YamlRoot.
func inlineFixtures(t *testing.T) []fixture {
	t.Helper()
	path := filepath.Join(referenceDir(t), inlineSource)
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	var failed []string
	ast.Inspect(file, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isType(lit.Type, "config", "YamlRoot") {
			return true
		}
		pos := fset.Position(lit.Pos())
		name := fmt.Sprintf("%s:%d", inlineSource, pos.Line)
		var root config.YamlRoot
		if err := evalLiteral(lit, reflect.ValueOf(&root).Elem()); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			return false
		}
		data, err := yaml.Marshal(toYAML(reflect.ValueOf(root)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if back, err := referenceYAML(name, data); err != nil || !reflect.DeepEqual(normalize(back), normalize(&root)) {
			t.Fatalf("%s: envoyproxy/ratelimit reads its YAML back as %+v (%v); want the literal's %+v\n%s", name, back, err, &root, data)
		}
		out = append(out, fixture{name: name, files: []envoyconf.File{{Name: name + ".yaml", Data: data}}})
		return false
	})
	if len(failed) > 0 {
		t.Fatalf("literals of %s the evaluator cannot read:\n%s", inlineSource, strings.Join(failed, "\n"))
	}
	if len(out) < 20 {
		t.Fatalf("found %d config.YamlRoot literals in %s; want its ~20", len(out), path)
	}
	return out
}

// referenceYAML returns what envoyproxy/ratelimit's loader reads from the file name of data, or
// the error it panics with.
func referenceYAML(name string, data []byte) (root *config.YamlRoot, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return config.ConfigFileContentToYaml(name, string(data)), nil
}

// isType reports whether expr names the type pkg.name.
func isType(expr ast.Expr, pkg, name string) bool {
	sel, ok := expr.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// evalLiteral evaluates the expression e into v, whose type is the one e must have: composite
// literals of structs (fields by name) and slices (their element types elided or named), &T{} of
// a pointer, string, integer and boolean literals, and nil. Anything else is an error naming it.
func evalLiteral(e ast.Expr, v reflect.Value) error {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return evalLiteral(e.X, v)
	case *ast.UnaryExpr:
		if e.Op != token.AND || v.Kind() != reflect.Pointer {
			return fmt.Errorf("%v of a %v", e.Op, v.Type())
		}
		p := reflect.New(v.Type().Elem())
		if err := evalLiteral(e.X, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case *ast.Ident:
		switch {
		case e.Name == "nil" && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice):
			v.SetZero()
		case (e.Name == "true" || e.Name == "false") && v.Kind() == reflect.Bool:
			v.SetBool(e.Name == "true")
		default:
			return fmt.Errorf("identifier %s for a %v: only nil, true and false are values", e.Name, v.Type())
		}
		return nil
	case *ast.BasicLit:
		return setBasic(e, v)
	case *ast.CompositeLit:
		if e.Type != nil && !literalType(e.Type, v.Type()) {
			return fmt.Errorf("a literal of %s for a %v", types(e.Type), v.Type())
		}
		return setComposite(e, v)
	}
	return fmt.Errorf("%T for a %v: not a literal", e, v.Type())
}

// setBasic sets v to the basic literal e.
func setBasic(e *ast.BasicLit, v reflect.Value) error {
	switch {
	case e.Kind == token.STRING && v.Kind() == reflect.String:
		s, err := strconv.Unquote(e.Value)
		if err != nil {
			return err
		}
		v.SetString(s)
	case e.Kind == token.INT && v.CanUint():
		n, err := strconv.ParseUint(strings.ReplaceAll(e.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case e.Kind == token.INT && v.CanInt():
		n, err := strconv.ParseInt(strings.ReplaceAll(e.Value, "_", ""), 0, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	default:
		return fmt.Errorf("%v literal %s for a %v", e.Kind, e.Value, v.Type())
	}
	return nil
}

// setComposite sets v, a struct or a slice, to the elements of the composite literal e.
func setComposite(e *ast.CompositeLit, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Struct:
		for _, el := range e.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				return fmt.Errorf("a %v literal without field names", v.Type())
			}
			id, ok := kv.Key.(*ast.Ident)
			if !ok {
				return fmt.Errorf("a %v field named by a %T", v.Type(), kv.Key)
			}
			f := v.FieldByName(id.Name)
			if !f.IsValid() || !f.CanSet() {
				return fmt.Errorf("%v has no field %s", v.Type(), id.Name)
			}
			if err := evalLiteral(kv.Value, f); err != nil {
				return fmt.Errorf("%s: %w", id.Name, err)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), len(e.Elts), len(e.Elts))
		for i, el := range e.Elts {
			if _, ok := el.(*ast.KeyValueExpr); ok {
				return fmt.Errorf("an indexed %v literal", v.Type())
			}
			if err := evalLiteral(el, s.Index(i)); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		v.Set(s)
	default:
		return fmt.Errorf("a composite literal for a %v", v.Type())
	}
	return nil
}

// literalType reports whether the type expression of a composite literal names t: config.Name for
// the named type Name of package config, []E for a slice of E, *E of a pointer.
func literalType(expr ast.Expr, t reflect.Type) bool {
	switch expr := expr.(type) {
	case *ast.SelectorExpr:
		return isType(expr, "config", t.Name()) && t.PkgPath() == reflect.TypeFor[config.YamlRoot]().PkgPath()
	case *ast.ArrayType:
		return expr.Len == nil && t.Kind() == reflect.Slice && literalType(expr.Elt, t.Elem())
	case *ast.StarExpr:
		return t.Kind() == reflect.Pointer && literalType(expr.X, t.Elem())
	}
	return false
}

// types spells the type expression expr, for an error.
func types(expr ast.Expr) string {
	switch expr := expr.(type) {
	case *ast.SelectorExpr:
		return types(expr.X) + "." + expr.Sel.Name
	case *ast.Ident:
		return expr.Name
	case *ast.ArrayType:
		return "[]" + types(expr.Elt)
	case *ast.StarExpr:
		return "*" + types(expr.X)
	}
	return fmt.Sprintf("%T", expr)
}

// toYAML returns v as the YAML a person writes for it: each struct a mapping of its fields in
// order, named as envoyproxy/ratelimit's YAML decoder (gopkg.in/yaml.v2) names them (the yaml tag,
// else the field's name in lower case), fields of zero value left out, as they read back the same.
func toYAML(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return toYAML(v.Elem())
	case reflect.Struct:
		var m yaml.MapSlice
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			if f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if name == "" {
				name = strings.ToLower(sf.Name)
			}
			m = append(m, yaml.MapItem{Key: name, Value: toYAML(f)})
		}
		return m
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toYAML(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

// normalize returns root with its empty lists nil, as YAML without them reads back.
func normalize(root *config.YamlRoot) *config.YamlRoot {
	if root == nil {
		return nil
	}
	r := *root
	r.Descriptors = normalizeDescriptors(r.Descriptors)
	return &r
}

func normalizeDescriptors(ds []config.YamlDescriptor) []config.YamlDescriptor {
	if len(ds) == 0 {
		return nil
	}
	out := make([]config.YamlDescriptor, len(ds))
	for i, d := range ds {
		d.Descriptors = normalizeDescriptors(d.Descriptors)
		if d.RateLimit != nil && len(d.RateLimit.Replaces) == 0 {
			rl := *d.RateLimit
			rl.Replaces = nil
			d.RateLimit = &rl
		}
		out[i] = d
	}
	return out
}

// TestInlineLiteralsEvaluated checks the evaluator on literals made up here: every form it reads,
// and an error for each form it does not.
func TestInlineLiteralsEvaluated(t *testing.T) {
	src := `package p
var good = &config.YamlRoot{
	Domain: "d\t1",
	Descriptors: []config.YamlDescriptor{
		{Key: "k", Value: ` + "`v`" + `, RateLimit: &config.YamlRateLimit{RequestsPerUnit: 0x10, Unit: "minute", Unlimited: false}, ShadowMode: true},
		config.YamlDescriptor{Key: "k2", RateLimit: nil, Descriptors: []config.YamlDescriptor{{Key: "k3", DetailedMetric: (true)}}},
	},
}
var bad = []*config.YamlRoot{
	&config.YamlRoot{Domain: domain},
	&config.YamlRoot{Domain: "a" + "b"},
	&config.YamlRoot{Nope: "x"},
	&config.YamlRoot{Descriptors: []config.YamlRateLimit{}},
	&config.YamlRoot{Descriptors: []config.YamlDescriptor{{RateLimit: &config.YamlRateLimit{RequestsPerUnit: -1}}}},
	&config.YamlRoot{Descriptors: []config.YamlDescriptor{{RateLimit: &config.YamlRateLimit{RequestsPerUnit: 1099511627776}}}},
	&config.YamlRoot{Descriptors: []config.YamlDescriptor{{ShadowMode: 1}}},
	&config.YamlRoot{"positional"},
	&config.YamlRoot{Descriptors: []config.YamlDescriptor{0: {Key: "indexed"}}},
}
`
	file, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string][]ast.Expr{}
	for _, d := range file.Decls {
		spec := d.(*ast.GenDecl).Specs[0].(*ast.ValueSpec)
		values[spec.Names[0].Name] = []ast.Expr{spec.Values[0]}
		if lit, ok := spec.Values[0].(*ast.CompositeLit); ok && spec.Names[0].Name == "bad" {
			values["bad"] = lit.Elts
		}
	}
	var got *config.YamlRoot
	if err := evalLiteral(values["good"][0], reflect.ValueOf(&got).Elem()); err != nil {
		t.Fatal(err)
	}
	want := &config.YamlRoot{Domain: "d\t1", Descriptors: []config.YamlDescriptor{
		{Key: "k", Value: "v", RateLimit: &config.YamlRateLimit{RequestsPerUnit: 16, Unit: "minute"}, ShadowMode: true},
		{Key: "k2", Descriptors: []config.YamlDescriptor{{Key: "k3", DetailedMetric: true}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("evaluated %+v; want %+v", got, want)
	}
	data, err := yaml.Marshal(toYAML(reflect.ValueOf(got)))
	if err != nil {
		t.Fatal(err)
	}
	const wantYAML = "domain: \"d\\t1\"\ndescriptors:\n- key: k\n  value: v\n  rate_limit:\n    requests_per_unit: 16\n    unit: minute\n  shadow_mode: true\n- key: k2\n  descriptors:\n  - key: k3\n    detailed_metric: true\n"
	if string(data) != wantYAML {
		t.Errorf("YAML:\n%s\nwant:\n%s", data, wantYAML)
	}
	if len(values["bad"]) != 9 {
		t.Fatalf("%d bad literals, want 9", len(values["bad"]))
	}
	for _, e := range values["bad"] {
		var root *config.YamlRoot
		if err := evalLiteral(e, reflect.ValueOf(&root).Elem()); err == nil {
			t.Errorf("literal at offset %d evaluated as %+v; want an error", e.Pos(), root)
		} else {
			t.Logf("literal at offset %d: %v", e.Pos(), err)
		}
	}
}
