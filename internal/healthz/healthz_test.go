package healthz

import "testing"

func TestBody(t *testing.T) {
	for _, tc := range []struct {
		version, body string
		bad           bool
	}{
		{"", "ok\n", false},
		{"(devel)", "ok (devel)\n", false},
		{"v1.2.0", "ok v1.2.0\n", false},
		{"v0.0.0-20261202103404-67d80ee2e6b2+dirty", "ok v0.0.0-20261202103404-67d80ee2e6b2+dirty\n", false},
		{"v1 2", "", true},
		{"v1\n", "", true},
		{"v1\x7f", "", true},
		{"v1\u00e9", "", true},
	} {
		body, err := Body(tc.version)
		if (err != nil) != tc.bad || body != tc.body {
			t.Errorf("Body(%q) = %q, %v; want %q, error %v", tc.version, body, err, tc.body, tc.bad)
		}
	}
}
