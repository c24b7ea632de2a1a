// Command dump writes redisstore's entry points as they are loaded (take.lua, settle.lua,
// release.lua, batch.lua) into the directory named by its argument, for callgrind.sh.
//
//	cd bench && go run ./testdata/scriptcost /tmp/scripts
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/admit-dev/admit/internal/luasource"
	_ "github.com/admit-dev/admit/redisstore" // registers the sources
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dump DIR")
		os.Exit(2)
	}
	for _, name := range []string{"take", "settle", "release", "batch"} {
		src, _ := luasource.Lookup(name)
		if err := os.WriteFile(filepath.Join(os.Args[1], name+".lua"), []byte(src), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
