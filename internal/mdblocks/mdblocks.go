// Package mdblocks finds the fenced code blocks of markdown, for the tests that check the examples
// of the documentation.
package mdblocks

import "strings"

// Fenced returns the contents of the blocks of markdown whose opening fence is exactly ```info
// (such as "yaml", or "yaml envoy-ratelimit"), surrounding spaces aside, in order.
func Fenced(markdown, info string) []string {
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(markdown, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```"+info:
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
			cur.WriteByte('\n')
		}
	}
	return blocks
}
