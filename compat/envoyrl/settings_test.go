package envoyrl

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/ratelimit/src/settings"
)

// The markers of docs/envoy.md's table of envoyproxy/ratelimit's variables, which cmd/admit's
// TestEnvoyEnvDocumented keeps equal to the list admit serve --envoy-env reads.
const (
	envTableBegin = "<!-- envoy-env table: generated from cmd/admit's envoyVars; TestEnvoyEnvDocumented checks it -->\n"
	envTableEnd   = "<!-- end of the envoy-env table -->\n"
)

var envTableName = regexp.MustCompile("^\\| `([A-Z0-9_]+\\*?)` \\|")

// admitEnvoyVars returns the variables of docs/envoy.md's table: names, and NAME* for a family.
func admitEnvoyVars(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), envTableBegin)
	table, _, ok2 := strings.Cut(rest, envTableEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/envoy.md has no table between %q and %q", envTableBegin, envTableEnd)
	}
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if m := envTableName.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("docs/envoy.md's table names %d variables: %q", len(names), names)
	}
	return names
}

// envoyRLVars returns the variables envoyproxy/ratelimit's settings.Settings reads: the
// envconfig tag of each field (envconfig reads a field without one by its name in upper case).
func envoyRLVars() []string {
	var names []string
	st := reflect.TypeFor[settings.Settings]()
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() || f.Tag.Get("ignored") == "true" || isRuntimeOnly(f.Type) {
			continue
		}
		name := f.Tag.Get("envconfig")
		if name == "" {
			name = strings.ToUpper(f.Name)
		}
		names = append(names, name)
	}
	return names
}

// isRuntimeOnly reports whether a field of type t is set in code, never from the environment:
// a function or a pointer (the interceptor, the TLS configurations made from the files).
func isRuntimeOnly(t reflect.Type) bool {
	return t.Kind() == reflect.Func || t.Kind() == reflect.Pointer
}

// TestEveryEnvoyVariableListed reflects over envoyproxy/ratelimit's settings (the version go.mod
// pins) and fails on a variable admit's list, as docs/envoy.md shows it, does not name, by itself or
// in a NAME* family: one that admit serve --envoy-env would ignore without a word. A newer
// envoyproxy/ratelimit's new variable fails it until cmd/admit's envoyVars says what admit makes of it.
func TestEveryEnvoyVariableListed(t *testing.T) {
	listed := admitEnvoyVars(t)
	named := func(v string) bool {
		for _, l := range listed {
			if prefix, family := strings.CutSuffix(l, "*"); v == l || family && strings.HasPrefix(v, prefix) {
				return true
			}
		}
		return false
	}
	vars := envoyRLVars()
	if len(vars) < 50 {
		t.Fatalf("settings.Settings has %d variables: %q; the reflection lost them", len(vars), vars)
	}
	for _, v := range vars {
		if !named(v) {
			t.Errorf("envoyproxy/ratelimit reads %s, which cmd/admit's envoyVars (docs/envoy.md's table) does not name: add it, honoured or named in the warning", v)
		}
	}
	// And the other way: a name of the list that envoyproxy/ratelimit does not read is a typo.
	for _, l := range listed {
		prefix, family := strings.CutSuffix(l, "*")
		if !slices.ContainsFunc(vars, func(v string) bool { return v == l || family && strings.HasPrefix(v, prefix) }) {
			t.Errorf("docs/envoy.md's table names %s, which envoyproxy/ratelimit's settings do not read", l)
		}
	}
}
