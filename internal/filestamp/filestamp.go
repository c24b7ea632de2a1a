// Package filestamp tells whether files changed since they were last looked at, by their
// modification time and size, without reading them: the watch of admit serve's TLS files and
// client tokens.
package filestamp

import (
	"fmt"
	"os"
	"strings"
)

// A Stamp is what Of saw of a list of files: each one's modification time and size, or why it
// could not be seen. Two Stamps of the same files are equal when nothing changed that Of sees.
type Stamp string

// Of returns the Stamp of paths, in their order; an empty path is left out. It follows symbolic
// links, so a Kubernetes mount that swaps its ..data link changes the Stamp.
func Of(paths ...string) Stamp {
	var b strings.Builder
	for _, p := range paths {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			continue
		}
		fmt.Fprintf(&b, "%s: %d %d\n", p, fi.ModTime().UnixNano(), fi.Size())
	}
	return Stamp(b.String())
}
