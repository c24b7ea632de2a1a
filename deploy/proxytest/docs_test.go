package proxytest_test

import (
	"os"
	"regexp"
	"strconv"
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

// TestHAProxyReadme checks what deploy/haproxy/README.md says of admit.lua: the number of lines it
// gives is the script's, and the script loads no other Lua code (require, dofile, loadfile), so it
// is all admit's own.
func TestHAProxyReadme(t *testing.T) {
	readme, err := os.ReadFile("../haproxy/README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../haproxy/admit.lua")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\[admit\.lua\]\(admit\.lua\), (\d+) lines, first-party`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("deploy/haproxy/README.md does not say \"[admit.lua](admit.lua), N lines, first-party\"")
	}
	if n := strings.Count(string(script), "\n"); string(m[1]) != strconv.Itoa(n) {
		t.Errorf("deploy/haproxy/README.md says admit.lua has %s lines; it has %d", m[1], n)
	}
	if loads := regexp.MustCompile(`\b(require|dofile|loadfile|loadstring|load)\s*\(`).FindAll(script, -1); len(loads) > 0 {
		t.Errorf("admit.lua loads other code (%q): it is not all admit's own", loads)
	}
	for _, want := range []string{"HAProxy has no built-in forward-auth", "haproxy-proxy.cfg", "admit-proxy.yaml"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("deploy/haproxy/README.md does not say %q", want)
		}
	}
}
