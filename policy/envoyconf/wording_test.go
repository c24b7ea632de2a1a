package envoyconf_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
)

// TestSameWording makes one mistake in an admit file and in an envoyproxy/ratelimit file, and
// checks that both say it in the same words: one decoder reads both formats.
func TestSameWording(t *testing.T) {
	const admitPolicy = "policies:\n  - name: api\n    algorithm: gcra\n    window: 1s\n"
	const envoyRule = "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n"
	tests := []struct {
		mistake      string
		admit, envoy string // each file
		admitAt      string // the path of the field in error
		envoyAt      string
		want         string // the words after the path
	}{
		{"a field set twice",
			admitPolicy + "    limit: 10\n    limit: 20\n", envoyRule + "      requests_per_unit: 10\n      requests_per_unit: 20\n",
			"policies[0].limit", "descriptors[0].rate_limit.requests_per_unit", "set twice"},
		{"a misspelt field",
			admitPolicy + "    limit: 10\n    burts: 20\n", envoyRule + "      requests_per_unit: 10\n      burts: 20\n",
			"policies[0].burts", "descriptors[0].rate_limit.burts", "unknown field; did you mean burst?"},
		{"a number in quotes",
			admitPolicy + "    limit: \"10\"\n", envoyRule + "      requests_per_unit: \"10\"\n",
			"policies[0] (api).limit", "descriptors[0].rate_limit.requests_per_unit", `want a whole number, found the string "10"`},
		{"a hexadecimal number",
			admitPolicy + "    limit: 0x10\n", envoyRule + "      requests_per_unit: 0x10\n",
			"policies[0] (api).limit", "descriptors[0].rate_limit.requests_per_unit", "0x10: want a decimal whole number below 2^63"},
		{"a list for a string",
			admitPolicy + "    limit: 10\n    mode: [shadow]\n", envoyRule + "      requests_per_unit: 10\n      name: [n]\n",
			"policies[0] (api).mode", "descriptors[0].rate_limit.name", "want a string, found a list"},
		{"a word for a boolean",
			admitPolicy + "    limit: 10\n    aligned: yes\n", envoyRule + "      requests_per_unit: 10\n    shadow_mode: yes\n",
			"policies[0] (api).aligned", "descriptors[0].shadow_mode", `want true or false, found the string "yes"`},
		{"a field name not a string",
			"? [policies]\n: 1\npolicies: []\n", "? [domain]\n: 1\ndomain: api\n",
			"the file", "the file", "a field name must be a string"},
	}
	for _, tt := range tests {
		_, err := policy.Parse("admit.yaml", []byte(tt.admit))
		got := message(t, err, tt.admitAt)
		_, err = envoyconf.Parse(envoyconf.File{Name: "envoy.yaml", Data: []byte(tt.envoy)})
		if envoy := message(t, err, tt.envoyAt); got != tt.want || envoy != tt.want {
			t.Errorf("%s: admit says %q, envoy %q; want both %q", tt.mistake, got, envoy, tt.want)
		}
	}
}

// message returns the words of err's error at path, after the path.
func message(t *testing.T, err error, path string) string {
	t.Helper()
	var list policy.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v; want an ErrorList", err)
	}
	for _, e := range list {
		if words, ok := strings.CutPrefix(e.Msg, path+": "); ok {
			return words
		}
	}
	t.Errorf("no error at %s in:\n%v", path, err)
	return ""
}

// TestEveryErrorAtOnce checks that a file with many mistakes has all of them reported, in the
// order of their places.
func TestEveryErrorAtOnce(t *testing.T) {
	_, err := envoyconf.Parse(envoyconf.File{Name: "many.yaml", Data: []byte(`domain: api
descriptors:
  - key: user
    rate_limit:
      unit: fortnight
      requests_per_unt: 10
  - key: [ip]
  - key: path
    shadow_mode: maybe
    rate_limit:
      window: soon
      requests_per_unit: 10
`)})
	want := []string{
		"many.yaml:5:7: descriptors[0].rate_limit.requests_per_unit: missing",
		`many.yaml:5:13: descriptors[0].rate_limit.unit: "fortnight": want second, minute, hour, day, week, month or year`,
		"many.yaml:6:7: descriptors[0].rate_limit.requests_per_unt: unknown field; did you mean requests_per_unit?",
		"many.yaml:7:10: descriptors[1].key: want a string, found a list",
		`many.yaml:9:18: descriptors[2].shadow_mode: want true or false, found the string "maybe"`,
		`many.yaml:11:15: descriptors[2].rate_limit.window: "soon": want a duration such as 1s, 250ms or 24h`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("errors:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}
