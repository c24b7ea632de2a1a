package boundedread_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/admit-dev/admit/internal/boundedread"
)

func ExampleFile() {
	dir, _ := os.MkdirTemp("", "boundedread")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tokens")
	os.WriteFile(path, []byte("0123456789abcdef\n"), 0o600)

	data, err := boundedread.File("server.client_tokens_file", path, 1<<10)
	fmt.Printf("%q %v\n", data, err)
	_, err = boundedread.File("server.client_tokens_file", path, 8)
	fmt.Println(err != nil)
	// Output:
	// "0123456789abcdef\n" <nil>
	// true
}
