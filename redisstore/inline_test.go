package redisstore

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestInlineFragmentsAreAllUsed holds the --@inline markers of the straight paths, of the sliding
// log's module and of the fragments and the fragments in scripts/inline to each other: every marker
// names a fragment that exists, every fragment is asked for, by two markers at least (a piece used
// once stays where it is), and no marker is left in the assembled scripts.
func TestInlineFragmentsAreAllUsed(t *testing.T) {
	files, err := fs.Glob(inlineFS, "scripts/inline/*")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{"take_single.lua": takeSingleRaw, "settle_single.lua": settleSingleRaw, "sliding_log.lua": slidingLogRaw}
	for _, f := range files {
		b, err := inlineFS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[path.Base(f)] = string(b) // a fragment may ask for another
	}
	uses := map[string]int{}
	for file, src := range sources {
		for _, m := range inlineMarker.FindAllStringSubmatch(src, -1) {
			if _, ok := inlineFragment(m[2]); !ok {
				t.Errorf("%s asks for the inline fragment %q, which scripts/inline does not hold", file, m[2])
			}
			uses[m[2]]++
		}
	}
	var names []string
	for _, f := range files {
		name, ok := strings.CutSuffix(path.Base(f), ".lua")
		if !ok {
			t.Errorf("%s: a fragment is a .lua file", f)
			continue
		}
		names = append(names, name)
		if uses[name] < 2 {
			t.Errorf("the inline fragment %s is asked for %d times, want 2 or more (a piece used once stays where it is)", name, uses[name])
		}
		if frag, _ := inlineFragment(name); strings.TrimSpace(frag) == "" {
			t.Errorf("the inline fragment %s holds no Lua", name)
		}
	}
	if len(names) == 0 {
		t.Error("scripts/inline holds no fragment")
	}
	for name := range uses {
		if !slices.Contains(names, name) {
			t.Errorf("a marker names %q, which is no fragment", name)
		}
	}
	for _, sc := range []*script{takeScript, settleScript, releaseScript} {
		if inlineMarker.MatchString(sc.src) {
			t.Errorf("the assembled %s script still holds a --@inline marker", sc.name)
		}
	}
}

// TestExpandInlineIndentsAsTheMarker checks the splice itself: the fragment stands where its marker
// stood, every line indented as the marker, its header comment left out; a marker naming no
// fragment panics.
func TestExpandInlineIndentsAsTheMarker(t *testing.T) {
	got := expandInline("test.lua", "local now\nif x then\n    --@inline clock_us\nend\n")
	want := "local now\nif x then\n" +
		"    if CLOCK_FROM_ARGV then\n" +
		"      now = tonumber(ARGV[#ARGV])\n" +
		"    else\n" +
		"      local tm = redis.call('TIME')\n" +
		"      now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n" +
		"    end\n" +
		"end\n"
	if got != want {
		t.Errorf("expandInline:\n%s\nwant:\n%s", got, want)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"no_such_fragment"`) {
			t.Errorf("a marker naming no fragment: recovered %v, want a panic naming it", r)
		}
	}()
	expandInline("test.lua", "--@inline no_such_fragment\n")
}
