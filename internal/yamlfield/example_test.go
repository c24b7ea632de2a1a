package yamlfield_test

import (
	"fmt"
	"math"
	"time"

	"github.com/admit-dev/admit/internal/yamlfield"
)

func Example() {
	data := []byte(`name: api
limit: "10"
windw: 1s
burst: 0x10
`)
	var d yamlfield.Decoder
	root, ok := d.Document(data, "empty file: want a policy")
	if ok {
		f, _ := d.Mapping(root, "", "name", "limit", "window", "burst")
		name, _ := d.String(f["name"], "name")
		d.Int(f["limit"], "limit", 1, math.MaxInt64)
		d.Duration(f["window"], "window", 0, 24*time.Hour) // missing: nil, no error
		d.Int(f["burst"], "burst", 1, math.MaxInt64)
		fmt.Println("name:", name)
	}
	for _, e := range d.Errors() {
		fmt.Println("admit.yaml:" + e.Error())
	}
	// Output:
	// name: api
	// admit.yaml:2:8: limit: want a whole number, found the string "10"
	// admit.yaml:3:1: windw: unknown field; did you mean window?
	// admit.yaml:4:8: burst: 0x10: want a decimal whole number below 2^63
}

// A syntax error is placed at its offending token: yaml.v3 says only "line 1", the line where
// the list starts.
func ExampleDecoder_Document() {
	data := []byte("policies:\n  - name: api\n    limit: 10\n  window: 1s\n")
	var d yamlfield.Decoder
	if _, ok := d.Document(data, "empty file"); !ok {
		fmt.Println("admit.yaml:" + d.Errors()[0].Error())
	}
	// Output:
	// admit.yaml:4:3: YAML: did not find expected '-' indicator
}
