// Package healthz is the body of GET /healthz, which admit serve and admit proxy answer alike:
// "ok\n", or "ok VERSION\n" when the binary knows its version. A probe that reads the body's
// first word still reads "ok".
package healthz

import "fmt"

// Body returns the body of GET /healthz for version: "ok\n" for "", else "ok " + version + "\n".
// It reports an error for a version that is not printable ASCII without spaces.
func Body(version string) (string, error) {
	if version == "" {
		return "ok\n", nil
	}
	for i := 0; i < len(version); i++ {
		if c := version[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("version %q: want printable ASCII without spaces", version)
		}
	}
	return "ok " + version + "\n", nil
}
