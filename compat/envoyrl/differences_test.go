package envoyrl

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The kinds of an allowed difference.
const (
	// deliberate is a difference admit keeps by design.
	deliberate = "deliberate"
	// beingFixed is a known difference admit is to lose: when it no longer occurs, the test says so
	// (t.Log) and the entry is to be deleted, here and in docs/envoy.md.
	beingFixed = "being fixed"
	// toFix is a difference the oracle found that no one is fixing yet; like one being fixed, it is
	// logged when it no longer occurs.
	toFix = "to fix"
)

// A difference is an allowed difference between envoyproxy/ratelimit and admit: the only answers in
// which the tests let them disagree.
type difference struct {
	name   string
	kind   string // deliberate, beingFixed or toFix
	reason string
}

// differences is the one list of allowed differences; docs/envoy.md's "The live oracle" lists the
// same, in the same order (TestDifferencesDocumented).
var differences = []difference{
	{"key label", deliberate,
		"admit's envoy_compat series carry a label key, the whole stats key, beside the domain, key1 and key2 of envoyproxy/ratelimit's statsd-exporter mapping, which has no such label: rules below the second level (rl.a.b.c and rl.a.b.d) add up in one series of envoyproxy/ratelimit's and have one each in admit's, a query by domain, key1 and key2 summing them as there; the names, the other labels and the counts are the same"},
	{"rejected hits counted", deliberate,
		"envoyproxy/ratelimit counts a rejected hit (INCRBY before the check), admit never does: once a descriptor was refused hits that did not fit, admit's limit_remaining is what is left, envoyproxy/ratelimit's 0, and a later smaller hits_addend may fit in admit only"},
	{"counter past the limit", deliberate,
		"with --envoy-increment-over-limit a rejected hit fills what was left of its limit, as envoyproxy/ratelimit's INCRBY does, but admit's counter stops at the limit where envoyproxy/ratelimit's goes past it: a later check (hits_addend 0) is OVER_LIMIT there and OK with limit_remaining 0 in admit, and a larger limit on the same counter (a request's limit override) finds more left in admit"},
	{"middle wildcard", deliberate,
		"a value with a * before its end (bar*b in envoyproxy/ratelimit's test/config/wildcard.yaml) or several (foo*bar*baz): admit matches it as a pattern, as envoyproxy/ratelimit does since 2026-03; the only version of envoyproxy/ratelimit the Go module proxy serves (2026-01-22, the one compat/envoyrl/refsvc/go.mod pins) predates that, has only a trailing * for a wildcard and matches such a value literally: the difference is the reference's age, not admit's"},
}

// sightings records which allowed differences occurred in a test, and at its end logs each of those
// that did not: a difference being fixed that no longer occurs is to be deleted from the table.
type sightings struct {
	mu   sync.Mutex
	seen map[string]int
}

// newSightings returns the sightings of t, whose cleanup logs the differences of names (all when
// none) that did not occur.
func newSightings(t *testing.T, names ...string) *sightings {
	s := &sightings{seen: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for _, d := range differences {
			if len(names) > 0 && !containsString(names, d.name) {
				continue
			}
			if n := s.seen[d.name]; n > 0 {
				t.Logf("allowed difference %q (%s) occurred %d times", d.name, d.kind, n)
			} else if d.kind != deliberate {
				t.Logf("allowed difference %q (%s) did not occur in this test: once no test shows it, delete it from differences and docs/envoy.md", d.name, d.kind)
			}
		}
	})
	return s
}

// saw records an occurrence of the difference name, which must be in the table.
func (s *sightings) saw(t *testing.T, name string) {
	t.Helper()
	if !slicesContainsDifference(name) {
		t.Fatalf("difference %q is not in the table", name)
	}
	s.mu.Lock()
	s.seen[name]++
	s.mu.Unlock()
}

func slicesContainsDifference(name string) bool {
	for _, d := range differences {
		if d.name == name {
			return true
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

var docRow = regexp.MustCompile(`^\| (.+?) \| (deliberate|being fixed|to fix) \| (.+) \|$`)

// TestDifferencesDocumented checks that docs/envoy.md's "The live oracle" lists the differences of
// the table, in its order, with its kinds and reasons.
func TestDifferencesDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## The live oracle\n")
	if !ok {
		t.Fatal(`docs/envoy.md has no "## The live oracle" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var got []difference
	for _, line := range strings.Split(section, "\n") {
		if m := docRow.FindStringSubmatch(line); m != nil {
			got = append(got, difference{name: strings.Trim(m[1], "`"), kind: m[2], reason: m[3]})
		}
	}
	for i := range max(len(got), len(differences)) {
		switch {
		case i >= len(got):
			t.Errorf("docs/envoy.md lacks the difference %q: add the row\n| %s | %s | %s |", differences[i].name, differences[i].name, differences[i].kind, differences[i].reason)
		case i >= len(differences):
			t.Errorf("docs/envoy.md lists %q, which the table of differences_test.go has not", got[i].name)
		case got[i] != differences[i]:
			t.Errorf("docs/envoy.md's difference %d is\n| %s | %s | %s |\nwant\n| %s | %s | %s |", i+1,
				got[i].name, got[i].kind, got[i].reason, differences[i].name, differences[i].kind, differences[i].reason)
		}
	}
}
