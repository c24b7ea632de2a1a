// Command luagen writes redisstore's straight paths, scripts/take_single.lua and
// scripts/settle_single.lua, from their templates in scripts/straight/ and the fragments they ask
// for: `go generate ./redisstore` runs it, and a test fails while a checked-in file is not what it
// writes.
//
// A straight path decides the common calls with no function of its own: in Redis's Lua every
// function is a closure made anew on every call, which costs more than the piece of Lua it would
// share. So a piece of Lua that the straight paths run in several places, or that a module runs
// too, is written once, as a fragment, and spliced in as text where a template asks for it:
//
//	--@inline <name>
//
// stands, alone on its line, where the fragment <name> goes; each line of the fragment is written
// there indented as the directive. A fragment is either a region of a script loaded as written (an
// algorithm module, the prelude or an entry point), code that script runs itself, between
//
//	--@fragment <name>
//	--@end
//
// (the module is loaded as written: the directives are comments to Lua), or a file
// scripts/inline/<name>.lua for a piece no module runs as it is. A fragment's header comment (the
// comment lines it starts with) names the locals it reads and sets, which every site declares under
// those names; it is left out of the splice. A fragment may ask for others, never in a circle. The
// generator reads the directives as lines of a small language of their own, and refuses, naming the
// file and line, a directive it does not know, a fragment asked for and not defined, defined twice,
// left open, or used once only (a piece used once stays where it is).
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
