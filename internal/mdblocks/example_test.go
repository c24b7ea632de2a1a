package mdblocks_test

import (
	"fmt"

	"github.com/admit-dev/admit/internal/mdblocks"
)

func ExampleFenced() {
	markdown := "# Config\n\n```yaml\npolicies: []\n```\n\n```yaml envoy-ratelimit\ndomain: x\n```\n"
	fmt.Printf("%q\n", mdblocks.Fenced(markdown, "yaml"))
	fmt.Printf("%q\n", mdblocks.Fenced(markdown, "yaml envoy-ratelimit"))
	// Output:
	// ["policies: []\n"]
	// ["domain: x\n"]
}
