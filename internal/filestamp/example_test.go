package filestamp_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/admit-dev/admit/internal/filestamp"
)

func Example() {
	dir, _ := os.MkdirTemp("", "filestamp")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("first\n"), 0o600)
	before := filestamp.Of(file)
	fmt.Println(filestamp.Of(file) == before) // nothing changed
	os.WriteFile(file, []byte("a longer second\n"), 0o600)
	fmt.Println(filestamp.Of(file) == before) // the size changed
	// Output:
	// true
	// false
}
