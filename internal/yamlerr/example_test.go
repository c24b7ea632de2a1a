package yamlerr_test

import (
	"fmt"
	"strings"

	"github.com/admit-dev/admit/internal/yamlerr"
	"go.yaml.in/yaml/v3"
)

func Example() {
	data := "policies:\n  - name: api\n    limit: 10\n  window: 1s\n"
	var n yaml.Node
	err := yaml.NewDecoder(strings.NewReader(data)).Decode(&n)
	fmt.Println(err)
	if e, ok := yamlerr.Locate([]byte(data), err); ok {
		fmt.Printf("admit.yaml:%d:%d: %s\n", e.Line, e.Column, e.Msg)
	}
	// Output:
	// yaml: line 1: did not find expected '-' indicator
	// admit.yaml:4:3: did not find expected '-' indicator
}
