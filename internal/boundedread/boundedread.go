// Package boundedread reads a file of bounded size whole, with errors that name the setting it came
// from: the TLS files and client tokens of admit serve.
package boundedread

import (
	"fmt"
	"io"
	"os"
)

// File reads the file at path, which the setting field names, refusing one larger than max bytes.
// Its errors start with field; the os errors name the path.
func File(field, path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1)) // one byte more tells a file too large
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", field, err)
	case int64(len(data)) > max:
		return nil, fmt.Errorf("%s: %s is larger than %d bytes", field, path, max)
	}
	return data, nil
}
