// Command algopicture draws docs/algorithms.svg: one client's bursty requests over a few seconds,
// admitted or rejected, under each algorithm, one row per algorithm, so that the fixed window's
// boundary burst — up to twice the limit within a moment around a window's end — is visible.
//
// Each row replays the same requests through the algorithm's pure transition in internal/algo, as a
// store would, so the picture shows what admit decides, not a drawing of it. The output depends on
// nothing but the code: `make pictures` regenerates the checked-in file, and a test fails when it is
// stale.
//
// Usage:
//
//	go run ./internal/tools/algopicture -o docs/algorithms.svg
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "", "write the SVG to this file instead of standard output")
	flag.Parse()
	var b bytes.Buffer
	render(&b, replay(scenario()))
	if *out == "" {
		os.Stdout.Write(b.Bytes())
		return
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "algopicture:", err)
		os.Exit(1)
	}
}
