package proxytest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsQuoteTheShippedFiles checks that the nginx and Caddy snippets of docs/forward-auth.md
// are quoted from the files this package tests: each line of a block fenced ```nginx or
// ```caddyfile, its comment dropped, is a line of deploy/nginx/admit.conf or deploy/caddy/Caddyfile.
func TestDocsQuoteTheShippedFiles(t *testing.T) {
	doc, err := os.ReadFile("../../docs/forward-auth.md")
	if err != nil {
		t.Fatal(err)
	}
	for lang, file := range map[string]string{"nginx": "../nginx/admit.conf", "caddyfile": "../caddy/Caddyfile"} {
		blocks := regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
		if len(blocks) == 0 {
			t.Errorf("docs/forward-auth.md has no ```%s block", lang)
			continue
		}
		shipped, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := map[string]bool{}
		for l := range strings.Lines(string(shipped)) {
			lines[uncomment(l)] = true
		}
		for _, b := range blocks {
			for l := range strings.Lines(b[1]) {
				if l = uncomment(l); l != "" && !lines[l] {
					t.Errorf("docs/forward-auth.md's ```%s block has %q, which %s does not", lang, l, file)
				}
			}
		}
	}
}

// uncomment returns line without its # comment and the spaces around it.
func uncomment(line string) string {
	line, _, _ = strings.Cut(line, "#")
	return strings.TrimSpace(line)
}
