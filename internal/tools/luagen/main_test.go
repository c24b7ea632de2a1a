package main

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// scriptsDir is redisstore's scripts directory, the generator's input and output.
const scriptsDir = "../../../redisstore/scripts"

// copyScripts returns the files under scriptsDir, to change in a test.
func copyScripts(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(scriptsDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(scriptsDir + "/" + p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The checked-in straight paths are what the generator writes now from their templates and the
// fragments: they can never go stale.
func TestGeneratedScriptsAreCurrent(t *testing.T) {
	if err := check(os.DirFS(scriptsDir)); err != nil {
		t.Fatal(err)
	}
	out, err := generate(os.DirFS(scriptsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"take_single.lua", "settle_single.lua"} {
		src, ok := out[name]
		if !ok {
			t.Fatalf("the generator writes no %s", name)
		}
		first, rest, _ := strings.Cut(string(src), "\n")
		if !strings.HasPrefix(first, "-- Code generated ") || !strings.HasSuffix(first, " DO NOT EDIT.") {
			t.Errorf("%s starts with %q, want the generated-code line", name, first)
		}
		for i, l := range strings.Split(rest, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--@") {
				t.Errorf("%s:%d still holds a directive: %q", name, i+2, l)
			}
		}
	}
}

// The currency check fails on a copy whose generated file was edited by hand, or whose sources
// changed without generating again: a module's fragment, an inline fragment, a template.
func TestCheckFailsOnAStaleCopy(t *testing.T) {
	for _, tc := range []struct {
		file, old, new string
	}{
		{"take_single.lua", "local mask, nkeys = ARGV[3], #KEYS", "local mask, nkeys = ARGV[3], #KEYS "}, // the output edited
		{"sliding_log.lua", "if #args == 2000 or", "if #args == 1000 or"},                                // a module's fragment
		{"prelude.lua", "tonumber(tm[2])", "tonumber(tm[2]) + 0"},                                        // the prelude's fragment
		{"straight/settle_single.lua", "local ts, as =", "local ts, as, x ="},                            // a template
		{"sliding_window.lua", "used = used + q\n", "used = used + q + 0\n"},                             // a fragment settle uses too
	} {
		fsys := copyScripts(t)
		f := fsys[tc.file]
		if f == nil || !strings.Contains(string(f.Data), tc.old) {
			t.Fatalf("%s does not hold %q", tc.file, tc.old)
		}
		if err := check(fsys); err != nil {
			t.Fatalf("the unchanged copy: %v", err)
		}
		f.Data = []byte(strings.Replace(string(f.Data), tc.old, tc.new, 1))
		if err := check(fsys); err == nil {
			t.Errorf("%s changed (%q to %q): check passes, want it to fail", tc.file, tc.old, tc.new)
		}
	}
}

// A fragment stands where its directive stood, every line indented as the directive (and a
// fragment's own fragments as their directive within it, on top), its header comment left out; a
// module's fragment is its region, dedented.
func TestSpliceIndentsAsTheDirective(t *testing.T) {
	fsys := fstest.MapFS{
		"straight/t.lua":   {Data: []byte("local now\nif x then\n    --@inline outer\nend\n  --@inline mod\n--@inline mod\n")},
		"inline/outer.lua": {Data: []byte("-- outer: a header.\n-- Reads nothing.\nif y then\n  --@inline clock\nend\n\nz = 1\n")},
		"inline/clock.lua": {Data: []byte("-- clock: sets now.\nnow = 1\n")},
		"m.lua":            {Data: []byte("local function f()\n  --@fragment mod\n  -- mod: its header.\n  a = 2\n\n    b = 3\n  --@end\nend\n")},
		// clock is asked for once, inside outer, which is asked for once: the rule counts lines
		// that ask, so both need a second
		"straight/u.lua": {Data: []byte("--@inline outer\n--@inline clock\n")},
	}
	out, err := generate(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := header("t.lua") + "local now\nif x then\n" +
		"    if y then\n" +
		"      now = 1\n" +
		"    end\n" +
		"\n" +
		"    z = 1\n" +
		"end\n" +
		"  a = 2\n\n    b = 3\n" +
		"a = 2\n\n  b = 3\n"
	if got := string(out["t.lua"]); got != want {
		t.Errorf("t.lua:\n%s\nwant:\n%s", got, want)
	}
}

// Every mistake in the sources is refused, naming where it is.
func TestGenerateRefusesBrokenSources(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown fragment", map[string]string{"straight/t.lua": "--@inline nope\n--@inline nope\n"}, "straight/t.lua:1: asks for the fragment nope"},
		{"circle", map[string]string{"straight/t.lua": "--@inline a\n--@inline a\n", "inline/a.lua": "--@inline b\n", "inline/b.lua": "x = 1\n--@inline a\n"}, "in a circle: a -> b -> a"},
		{"inline fragment used once", map[string]string{"straight/t.lua": "--@inline a\n", "inline/a.lua": "x = 1\n"}, "inline/a.lua:1: the fragment a is asked for 1 times, want 2"},
		{"module fragment never used", map[string]string{"straight/t.lua": "x = 1\n", "m.lua": "--@fragment a\nx = 1\n--@end\n"}, "m.lua:1: the fragment a is asked for 0 times, want 1"},
		{"unknown directive", map[string]string{"straight/t.lua": "  --@inlined a\n"}, `straight/t.lua:1: unknown directive "--@inlined"`},
		{"bad name", map[string]string{"straight/t.lua": "--@inline Clock\n"}, "straight/t.lua:1: --@inline needs one fragment name"},
		{"two names", map[string]string{"straight/t.lua": "--@inline a b\n"}, "needs one fragment name"},
		{"region left open", map[string]string{"straight/t.lua": "--@inline a\n", "m.lua": "--@fragment a\nx = 1\n"}, "m.lua:1: the fragment a has no --@end"},
		{"end without region", map[string]string{"straight/t.lua": "x = 1\n", "m.lua": "x = 1\n--@end\n"}, "m.lua:2: --@end without a --@fragment"},
		{"nested regions", map[string]string{"straight/t.lua": "x = 1\n", "m.lua": "--@fragment a\n--@fragment b\n--@end\n--@end\n"}, "m.lua:2: --@fragment b inside the fragment a"},
		{"end indented otherwise", map[string]string{"straight/t.lua": "--@inline a\n", "m.lua": "  --@fragment a\n  x = 1\n--@end\n"}, "m.lua:3: --@end indented unlike"},
		{"line outside the region's indentation", map[string]string{"straight/t.lua": "--@inline a\n", "m.lua": "  --@fragment a\nx = 1\n  --@end\n"}, "m.lua:2: a line of the fragment a indented less"},
		{"module asks", map[string]string{"straight/t.lua": "x = 1\n", "m.lua": "--@inline a\n"}, "m.lua:1: a module is loaded as written"},
		{"template defines", map[string]string{"straight/t.lua": "--@fragment a\nx = 1\n--@end\n"}, "straight/t.lua:1: --@fragment belongs in a module"},
		{"defined twice", map[string]string{"straight/t.lua": "--@inline a\n--@inline a\n", "inline/a.lua": "x = 1\n", "m.lua": "--@fragment a\nx = 1\n--@end\n"}, "defined twice"},
		{"empty fragment", map[string]string{"straight/t.lua": "--@inline a\n--@inline a\n", "inline/a.lua": "-- only a header\n"}, "inline/a.lua:1: the fragment a holds no Lua"},
		{"no newline at the end", map[string]string{"straight/t.lua": "x = 1"}, "straight/t.lua: does not end with a newline"},
		{"no template", map[string]string{"m.lua": "x = 1\n"}, "no template in straight/"},
	} {
		fsys := fstest.MapFS{}
		for name, src := range tc.files {
			fsys[name] = &fstest.MapFile{Data: []byte(src)}
		}
		_, err := generate(fsys)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: generate: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
