package envoyconf_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/policy/envoyconf"
)

var update = flag.Bool("update", false, "rewrite the .err files of testdata/errors from the errors Parse reports")

// TestErrorFixtures parses each file of testdata/errors, which holds one mistake, and compares what
// Parse reports with the file's .err twin, exactly: one error, with its place and message.
func TestErrorFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = envoyconf.Parse(envoyconf.File{Name: file, Data: data})
			var list policy.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse = %v; want an ErrorList", err)
			}
			if len(list) != 1 {
				t.Errorf("%d errors; want the fixture's one mistake:\n%v", len(list), err)
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("%v (run go test ./policy/envoyconf -update to write it)", rerr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("errors:\n%s\nwant:\n%s", got, want)
			}
			if i := strings.IndexFunc(err.Error(), func(r rune) bool { return r > unicode.MaxASCII }); i >= 0 {
				t.Errorf("the error holds a non-ASCII character at byte %d: %q", i, err.Error())
			}
		})
	}
}

// FuzzParse checks that Parse never panics, and reports an error as a non-empty ErrorList, each
// error naming the file.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := envoyconf.Parse(envoyconf.File{Name: "fuzz.yaml", Data: data})
		if err == nil {
			return
		}
		var list policy.ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error %v is not a non-empty ErrorList", err)
		}
		for _, e := range list {
			if e.File != "fuzz.yaml" {
				t.Fatalf("error %v names file %q", e, e.File)
			}
		}
	})
}
