package envoyrl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/envoyproxy/ratelimit/src/stats"
	gostats "github.com/lyft/gostats"

	"github.com/admit-dev/admit/policy/envoyconf"
)

// referenceDir returns the directory of envoyproxy/ratelimit's module in the module cache, at the
// version go.mod pins.
func referenceDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/envoyproxy/ratelimit").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m github.com/envoyproxy/ratelimit: %q, %v", out, err)
	}
	return dir
}

// A fixture is a set of configuration files, loaded together, as one directory.
type fixture struct {
	name  string
	files []envoyconf.File
}

// fixtures returns the configuration files of envoyproxy/ratelimit's module: each file on its own,
// then each directory of them as one configuration.
func fixtures(t *testing.T) []fixture {
	t.Helper()
	root := referenceDir(t)
	var out []fixture
	dirs := map[string][]envoyconf.File{}
	for _, dir := range []string{"test/config", "test/integration/runtime", "examples/ratelimit/config"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			f := envoyconf.File{Name: rel, Data: data}
			out = append(out, fixture{name: rel, files: []envoyconf.File{f}})
			dirs[filepath.Dir(rel)] = append(dirs[filepath.Dir(rel)], f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	}) {
		if len(dirs[dir]) > 1 {
			out = append(out, fixture{name: dir + "/", files: dirs[dir]})
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d configuration fixtures in %s; want the module's test/config, test/integration and examples", len(out), root)
	}
	return out
}

// referenceLoad loads files with envoyproxy/ratelimit's own loader, as its service loads its
// runtime directory (domains not merged, its default), and returns the configuration or the
// error it panics with.
func referenceLoad(files []envoyconf.File) (cfg config.RateLimitConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("%v", r)
		}
	}()
	var load []config.RateLimitConfigToLoad
	for _, f := range files {
		load = append(load, config.RateLimitConfigToLoad{Name: f.Name, ConfigYaml: config.ConfigFileContentToYaml(f.Name, string(f.Data))})
	}
	manager := stats.NewStatManager(gostats.NewStore(gostats.NewNullSink(), false), settings.Settings{})
	return config.NewRateLimitConfigImpl(load, manager, false), nil
}

// A meaning is what a configuration error says, recognised in each implementation's wording: the
// whole message of envoyproxy/ratelimit's error (it reports the first it finds), each line of
// admit's (it reports every error, one a line, "file:line:column: path: message").
type meaning struct {
	name             string
	reference, admit *regexp.Regexp
}

// meanings are the kinds of configuration errors, each with how envoyproxy/ratelimit and admit word
// it. A key that is no string, such as 0.25, is a field no file has in both: envoyproxy/ratelimit
// says it is no string, admit that it is unknown.
var meanings = []meaning{
	{"not YAML", regexp.MustCompile(`: error loading config file: yaml: `), regexp.MustCompile(`^[^ ]+:\d+:\d+: YAML: `)},
	{"an unknown field", regexp.MustCompile(`: config error, (unknown key|key is not of type string)`), regexp.MustCompile(`: unknown field`)},
	{"a bad unit", regexp.MustCompile(`: invalid rate limit unit`), regexp.MustCompile(`\.unit: ".*": want second, minute`)},
	{"two files of one domain", regexp.MustCompile(`: duplicate domain`), regexp.MustCompile(`: domain: ".*" is configured in .* too$`)},
	{"a duplicate descriptor", regexp.MustCompile(`: duplicate descriptor composite key`), regexp.MustCompile(`: duplicate descriptor `)},
	{"no domain", regexp.MustCompile(`: config file cannot have empty domain`), regexp.MustCompile(`: domain: (missing|empty)$`)},
	{"no key", regexp.MustCompile(`: descriptor has empty key`), regexp.MustCompile(`\.key: (missing|empty)`)},
	{"an empty replaces", regexp.MustCompile(`: should not have an empty replaces entry`), regexp.MustCompile(`\.replaces\[\d+\]\.name: (missing|empty|want a string, found null)`)},
	{"a rule replacing itself", regexp.MustCompile(`: replaces should not contain name of same descriptor`), regexp.MustCompile(`\.replaces\[\d+\]\.name: .*(cannot replace itself|own name)`)},
	{"a unit with unlimited", regexp.MustCompile(`: should not specify rate limit unit when unlimited`), regexp.MustCompile(`: an unlimited rate_limit has no unit`)},
	{"not a descriptor", regexp.MustCompile(`: config error, yaml file contains list of type other than map`), regexp.MustCompile(`: want a mapping of the fields`)},
}

// referenceMeaning returns the name of the meaning of envoyproxy/ratelimit's error, or "".
func referenceMeaning(err error) string {
	for _, m := range meanings {
		if m.reference.MatchString(err.Error()) {
			return m.name
		}
	}
	return ""
}

// admitMeanings returns the meaning of each line of admit's error ("" for a line of none).
func admitMeanings(err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		name := ""
		for _, m := range meanings {
			if m.admit.MatchString(line) {
				name = m.name
				break
			}
		}
		out = append(out, name)
	}
	return out
}

// TestConfigFixtures loads every configuration file of envoyproxy/ratelimit's module (its
// test/config, its integration test's runtime directory and its example), each alone and each
// directory as one, and the inline configurations of its config tests (inlineFixtures), with
// envoyproxy/ratelimit's loader and with admit's (policy/envoyconf), and
// checks that both accept it, or both refuse it for the same reason (envoyproxy/ratelimit's one error
// among admit's), except where the differences table allows otherwise. Where both accept it, each
// descriptor of its files (with a value its wildcard matches, or any value for a key alone) must
// find the same rule in both (compareRules).
func TestConfigFixtures(t *testing.T) {
	seen := newSightings(t, "middle wildcard")
	files, inline := fixtures(t), inlineFixtures(t)
	t.Logf("%d comparisons: %d of files and directories, %d of the config.YamlRoot literals of %s", len(files)+len(inline), len(files), len(inline), inlineSource)
	lookups := 0
	defer func() { t.Logf("%d descriptors of the accepted configurations found the same rule in both", lookups) }()
	for _, fx := range append(files, inline...) {
		refCfg, refErr := referenceLoad(fx.files)
		admitCfg, admitErr := envoyconf.Parse(fx.files...)
		t.Logf("%s: envoyproxy/ratelimit: %v; admit: %v", fx.name, refErr, admitErr)
		var got string
		switch {
		case refErr == nil && admitErr == nil:
			lookups += compareRules(t, seen, fx, refCfg, admitCfg)
			continue
		case refErr != nil && admitErr != nil:
			rm, am := referenceMeaning(refErr), admitMeanings(admitErr)
			if rm != "" && slices.Contains(am, rm) {
				continue
			}
			got = fmt.Sprintf("both refuse it, envoyproxy/ratelimit as %q (%v), admit as %q (%v)", rm, refErr, am, admitErr)
		case refErr == nil:
			got = fmt.Sprintf("admit refuses it (%v), envoyproxy/ratelimit accepts it", admitErr)
		default:
			got = fmt.Sprintf("envoyproxy/ratelimit refuses it (%v), admit accepts it", refErr)
		}
		t.Errorf("%s: %s", fx.name, got)
	}
}

// referenceMatch reports the rule envoyproxy/ratelimit's loaded configuration finds for the
// descriptor entries of domain, or nil.
func referenceMatch(cfg config.RateLimitConfig, domain string, entries []envoyconf.Entry) *config.RateLimit {
	d := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range entries {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
	}
	return cfg.GetLimit(context.Background(), domain, d)
}

// descriptorPaths returns the entries of a request that reach each descriptor of ds under prefix:
// its value, a value its trailing wildcard matches, or "any" for a key alone; a '*' before a value's
// end is an x, as if it were a wildcard (envoyproxy/ratelimit has none there).
func descriptorPaths(prefix []envoyconf.Entry, ds []config.YamlDescriptor) [][]envoyconf.Entry {
	var out [][]envoyconf.Entry
	for _, d := range ds {
		value := d.Value
		switch {
		case value == "":
			value = "any"
		case strings.HasSuffix(value, "*"):
			value = strings.TrimSuffix(value, "*") + "matched"
		}
		value = strings.ReplaceAll(value, "*", "x") // a '*' before the end: a value it would match as a pattern
		path := append(slices.Clone(prefix), envoyconf.Entry{Key: d.Key, Value: value})
		out = append(out, path)
		out = append(out, descriptorPaths(path, d.Descriptors)...)
	}
	return out
}

// compareRules checks that every descriptor of the files of fx finds the same rule in
// envoyproxy/ratelimit's configuration ref and admit's adm: none in both, or the same
// requests_per_unit, unit, unlimited, shadow_mode, name and replaces. It returns how many did.
func compareRules(t *testing.T, seen *sightings, fx fixture, ref config.RateLimitConfig, adm *envoyconf.Config) (n int) {
	t.Helper()
	limited := 0
	defer func() {
		t.Logf("%s: %d descriptors find the same rule in both, %d of them a limit", fx.name, n, limited)
	}()
	for _, f := range fx.files {
		root := config.ConfigFileContentToYaml(f.Name, string(f.Data))
		for _, entries := range descriptorPaths(nil, root.Descriptors) {
			want, got := describeReference(referenceMatch(ref, root.Domain, entries)), describeAdmit(adm.Match(root.Domain, entries))
			if want != got && slices.ContainsFunc(rawValues(root.Descriptors, entries), middleWildcard) {
				seen.saw(t, "middle wildcard")
				t.Logf("%s: allowed difference %q: domain %s, descriptor %v: envoyproxy/ratelimit's rule is %s, admit's %s", fx.name, "middle wildcard", root.Domain, entries, want, got)
				continue
			}
			if want != got {
				t.Errorf("%s: domain %s, descriptor %v: envoyproxy/ratelimit's rule is %s, admit's %s", fx.name, root.Domain, entries, want, got)
				continue
			}
			n++
			if want != "none" {
				limited++
			}
		}
	}
	return n
}

// describeReference describes envoyproxy/ratelimit's rule r for compareRules.
func describeReference(r *config.RateLimit) string {
	switch {
	case r == nil:
		return "none"
	case r.Unlimited:
		return fmt.Sprintf("unlimited shadow=%t name=%q replaces=%q", r.ShadowMode, r.Name, r.Replaces)
	}
	return fmt.Sprintf("%d per %s shadow=%t name=%q replaces=%q", r.Limit.GetRequestsPerUnit(), strings.ToLower(r.Limit.GetUnit().String()), r.ShadowMode, r.Name, r.Replaces)
}

// describeAdmit describes admit's rule r for compareRules.
func describeAdmit(r *envoyconf.Rule) string {
	switch {
	case r == nil:
		return "none"
	case r.Unlimited:
		return fmt.Sprintf("unlimited shadow=%t name=%q replaces=%q", r.Limit.Shadow, r.Name, r.Replaces)
	}
	return fmt.Sprintf("%d per %s shadow=%t name=%q replaces=%q", r.Limit.Rate, r.Unit, r.Limit.Shadow, r.Name, r.Replaces)
}

// rawValues returns the configured values of the descriptors of ds that entries walks through, as
// descriptorPaths made it.
func rawValues(ds []config.YamlDescriptor, entries []envoyconf.Entry) []string {
	var out []string
	for _, e := range entries {
		var next []config.YamlDescriptor
		for _, d := range ds {
			if d.Key == e.Key && strings.Contains(d.Value, "*") {
				out = append(out, d.Value)
			}
			if d.Key == e.Key {
				next = append(next, d.Descriptors...)
			}
		}
		ds = next
	}
	return out
}

// middleWildcard reports whether a configured value has a '*' before its end.
func middleWildcard(value string) bool {
	i := strings.IndexByte(value, '*')
	return i >= 0 && i < len(value)-1
}
