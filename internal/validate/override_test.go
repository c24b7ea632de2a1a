package validate_test

import (
	"errors"
	"testing"

	"github.com/admit-dev/admit/internal/validate"
)

// A Request's OverrideKey is empty, or an override key in the hash slot of the Request's key.
func TestRequestOverrideKey(t *testing.T) {
	for _, tc := range []struct {
		key, okey string
		ok        bool
	}{
		{"rl:p:v1-fw1000:{abc}", "", true},
		{"rl:p:v1-fw1000:{abc}", "rl:p:o:{abc}", true},
		{"rl:p:v1-fw1000:{abc}:def", "rl:p:o:{abc}:def", true},
		{"plain", "rl:p:o:{plain}", true}, // a key without a tag hashes whole
		{"rl:p:v1-fw1000:{abc}", "rl:p:o:{abd}", false},
		{"rl:p:v1-fw1000:{abc}", "rl:p:v1:{abc}", false}, // not an override key
		{"rl:p:v1-fw1000:{abc}", "rl:p:o:abc", false},    // no tag
	} {
		err := validate.RequestOverrideKey(tc.key, tc.okey)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, validate.ErrInvalidRequest) {
			t.Errorf("RequestOverrideKey(%q, %q) = %v; want ok %v, else an invalid request", tc.key, tc.okey, err, tc.ok)
		}
	}
}
