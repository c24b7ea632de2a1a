package filestamp_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/filestamp"
)

// TestStampChanges checks that a Stamp changes with a file's size, its modification time, its
// disappearance, and the target of a symbolic link, and stays while nothing changes.
func TestStampChanges(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "one")
	write(b, "two")
	s := filestamp.Of(a, "", b)
	if again := filestamp.Of(a, b); again != s {
		t.Fatalf("Stamp changed with nothing changed (an empty path is left out): %q, then %q", s, again)
	}
	write(a, "three")
	if filestamp.Of(a, b) == s {
		t.Error("the Stamp did not change with a's size")
	}
	s = filestamp.Of(a, b)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(b, later, later); err != nil {
		t.Fatal(err)
	}
	if filestamp.Of(a, b) == s {
		t.Error("the Stamp did not change with b's modification time")
	}
	s = filestamp.Of(a, b)
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	gone := filestamp.Of(a, b)
	if gone == s {
		t.Error("the Stamp did not change when b was removed")
	}
	if filestamp.Of(a, b) != gone {
		t.Error("the Stamp of a missing file changed with nothing changed")
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	s = filestamp.Of(link)
	c := filepath.Join(dir, "c")
	write(c, "a different size")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c, link); err != nil {
		t.Fatal(err)
	}
	if filestamp.Of(link) == s {
		t.Error("the Stamp did not change when the link was pointed at another file")
	}
}
