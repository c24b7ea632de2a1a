// Command luagen writes redisstore's straight paths, scripts/take_single.lua and
// scripts/settle_single.lua, from their templates in scripts/straight/ and the fragments they ask
// for: `go generate ./redisstore` runs it, and a test fails while a checked-in file is not what it
// writes.
//
// A line `--@inline <name>` of a template stands where the fragment <name> goes, each of its lines
// indented as the directive. A fragment is a region of a script loaded as written (an algorithm
// module, the prelude or an entry point), between `--@fragment <name>` and `--@end`, or a file
// scripts/inline/<name>.lua; its header comment names the locals it reads and sets. The generator
// reads the directives as lines of a small language of their own and refuses, naming the file and
// line, a directive it does not know, a fragment asked for and not defined, defined twice, left
// open, asked for in a circle, or used once only. Why the straight paths splice text instead of
// calling functions: docs/redis.md#scripts.
//
// Usage, from redisstore:
//
//	go run ../internal/tools/luagen [-dir scripts]
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

func main() {
	dir := flag.String("dir", "scripts", "the scripts directory: modules, "+straightDir+"/ and "+inlineDir+"/ in, straight paths out")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "luagen:", err)
		os.Exit(1)
	}
}

// run generates the straight paths from the sources under dir and writes them there.
func run(dir string) error {
	out, err := generate(os.DirFS(dir))
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := os.WriteFile(filepath.Join(dir, name), out[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
