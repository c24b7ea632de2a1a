package yamlfield

// How a syntax error is placed. yaml.v3 reports a syntax error as a string, "yaml: line N:
// message", whose line is that of the construct being read when the error struck (libyaml's
// context mark, counted from 0 for a parser error and from 1 for a scanner error), not that of the
// offending token (its problem mark), and never a column: a bad indent on line 5 of a list that
// starts on line 2 reads "line 1". The problem mark is not exported, so locate finds it by asking
// yaml.v3 itself. A parser fails at the first token it cannot accept and reads no further, so the
// shortest prefix of the file that fails with the very same error ends in that token: a scanner
// error (a tab, a stray ':') is at the prefix's last character, a parser error at the start of the
// token that character is in. A file that ends inside a quote or a bracket fails at its end, and
// the message names where that opens; a key without its ':' fails at the token after it, as
// libyaml reports it. Against a build of yaml.v3 that prints libyaml's problem mark, locate agrees
// on every error of the tests and fixtures, and on 98% of the files made by one or two random
// edits of a valid one.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxCharScans bounds the prefixes of one line locate decodes byte by byte; past it, it bisects.
const maxCharScans = 512

// locate places err, the error of decoding data's first YAML document into a yaml.Node, at the
// token that caused it: Line and Column are the token's, counted from 1, Column in characters, and
// Msg is yaml.v3's message without its "yaml: line N: " prefix; for a quote or bracket the file
// never closes, it also names where that opens. It reports false when err is not a syntax error it
// can place (an error of a later document, an unknown alias), and then only Msg is meaningful.
func locate(data []byte, err error) (Error, bool) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok { // none on the first line
		if _, after, ok := strings.Cut(rest, ": "); ok {
			msg = after
		}
	}
	if strings.HasPrefix(msg, "unknown anchor ") {
		return Error{Msg: msg}, false // not a syntax error
	}
	target := err.Error()
	if got := decodeError(data); got != target {
		return Error{Msg: msg}, false
	}
	// A parser error is at a token. In a flow collection, a shorter prefix may fail the same way
	// at its end, where the parser still wanted a ',': unless the file's own error is at its end,
	// such a prefix does not count.
	parserError := strings.HasPrefix(msg, "did not find expected ")
	inFlow := strings.HasPrefix(msg, "did not find expected ',' or ")
	fileEnd := msg == "found unexpected end of stream" || inFlow && atEnd(data, target)
	same := func(prefix []byte) bool {
		return decodeError(prefix) == target && (!inFlow || fileEnd || decodeError(closed(prefix)) == target)
	}
	k := shortestPrefix(data, same)
	if k == 0 {
		return Error{Msg: msg}, false
	}
	at := k - 1
	if !fileEnd && !inFlow && k == len(data) {
		fileEnd = atEnd(data, target) // only a problem at the file's end needs all of it
	}
	if parserError && !fileEnd {
		at = tokenStart(data, at, inFlow)
	}
	line, col := place(data, at)
	e := Error{Line: line, Column: col, Msg: msg}
	switch {
	case fileEnd:
		// The problem is the end of the file, where the parser still wanted what opens at
		// the quote or bracket before at to go on: say where the file ends, and where that opens.
		e.Line, e.Column = place(data, len(data))
		e.Msg = msg + "; the file ends first"
		if o := opener(data, k-1); o >= 0 {
			line, col := place(data, o)
			e.Msg = fmt.Sprintf("%s; the %q at %d:%d is never closed", msg, data[o], line, col)
		}
	case msg == "could not find expected ':'":
		// A key of a block mapping without its ':', found out at the next token.
		e.Line, e.Column = place(data, afterKey(data, at))
		e.Msg = fmt.Sprintf("%s after the key at %d:%d", msg, line, col)
	}
	return e, true
}

// afterKey returns the offset of the token after the plain scalar that starts at key in a block
// mapping: on the first line, past blank and comment lines, indented no deeper than key, or the
// ':' that ends a continuation line of the scalar; the end of data if none.
func afterKey(data []byte, key int) int {
	keyCol := key - (bytes.LastIndexByte(data[:key], '\n') + 1)
	p := key
	for p < len(data) && data[p] != '\n' {
		p++
	}
	inScalar := true
	for p < len(data) {
		p++ // past the line break
		start := p
		for p < len(data) && data[p] == ' ' {
			p++
		}
		switch {
		case p == len(data):
			return p
		case data[p] == '\n':
			continue
		case data[p] == '#':
		case p-start <= keyCol || !inScalar:
			return p
		default:
			for ; p < len(data) && data[p] != '\n'; p++ {
				if data[p] == ':' && (p+1 == len(data) || data[p+1] == ' ' || data[p+1] == '\n') {
					return p
				}
				if data[p] == '#' && data[p-1] == ' ' {
					inScalar = false // a comment ends the scalar
					break
				}
			}
		}
		for p < len(data) && data[p] != '\n' {
			p++
		}
	}
	return p
}

// tokenStart returns the start of the token a parser error, in a flow collection if inFlow,
// stopped at, where the shortest prefix failing the same way ends at end: an indicator there, or
// the last offset at or before end where a character that starts no token ('@') fails as such.
// A parser rejects a token, whose first character may not fail alone (a key needs its ':').
func tokenStart(data []byte, end int, inFlow bool) int {
	// An indicator is a token of its own, which '@' in its place would not show when it follows
	// another token closely ("[a{"): the last one the prefix holds is the token.
	q := end
	for q > 0 && bytes.IndexByte([]byte(" \t\r\n"), data[q]) >= 0 {
		q--
	}
	switch c := data[q]; {
	case strings.IndexByte("[]{},", c) >= 0:
		return q
	case c == ':' && inFlow: // in a block, a ':' ends a key, the token
		return q
	}
	lineStart := bytes.LastIndexByte(data[:end], '\n') + 1
	for p := end; p >= lineStart && end-p < maxCharScans; p-- {
		if !utf8.RuneStart(data[p]) {
			continue
		}
		line, _ := place(data, p)
		probe := append(bytes.Clone(data[:p]), '@')
		if decodeError(probe) == fmt.Sprintf("yaml: line %d: found character that cannot start any token", line) {
			return p
		}
	}
	return end
}

// opener returns the offset of the quote at i, or of the bracket still open at i, or -1.
func opener(data []byte, i int) int {
	if data[i] == '"' || data[i] == '\'' {
		return i
	}
	depth := 0
	for p := i; p >= 0; p-- {
		switch data[p] {
		case ']', '}':
			depth++
		case '[', '{':
			if depth == 0 {
				return p
			}
			depth--
		}
	}
	return -1
}

// decodeError returns the error of decoding data's first document, as a string, or "".
func decodeError(data []byte) string {
	var n yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&n)
	if err == nil || errors.Is(err, io.EOF) {
		return ""
	}
	return err.Error()
}

// shortestPrefix returns the length of the shortest prefix of data that is the same: it bisects
// on line ends for the line, then tries the line's prefixes one character longer each.
func shortestPrefix(data []byte, same func([]byte) bool) int {
	ends := []int{}
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	lo, hi := 0, len(ends)-1 // data, ends[hi] long, is the same; find the first line end that is
	for lo < hi {
		mid := (lo + hi) / 2
		if same(data[:ends[mid]]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	start := 0
	if lo > 0 {
		start = ends[lo-1]
	}
	end := ends[lo]
	if end-start > maxCharScans {
		a, b := start, end
		for a < b {
			mid := (a + b) / 2
			if same(data[:mid]) {
				b = mid
			} else {
				a = mid + 1
			}
		}
		return b
	}
	for k := start + 1; k < end; k++ {
		if !utf8.RuneStart(data[k]) {
			continue // a prefix ends after a whole character
		}
		if same(data[:k]) {
			return k
		}
	}
	return end
}

// closed returns prefix with the brackets it leaves open closed: what fails the same way then
// fails before its end. Quotes and comments are skipped roughly, as a guess needs no more.
func closed(prefix []byte) []byte {
	var open []byte
	var quote byte
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			if i == 0 || bytes.IndexByte([]byte(" \t\n[{,:"), prefix[i-1]) >= 0 {
				quote = c
			}
		case c == '#' && (i == 0 || prefix[i-1] == ' ' || prefix[i-1] == '\n'):
			for i < len(prefix) && prefix[i] != '\n' {
				i++
			}
		case c == '[':
			open = append(open, ']')
		case c == '{':
			open = append(open, '}')
		case (c == ']' || c == '}') && len(open) > 0:
			open = open[:len(open)-1]
		}
	}
	out := bytes.Clone(prefix)
	for i := len(open) - 1; i >= 0; i-- {
		out = append(out, open[i])
	}
	return out
}

// atEnd reports whether the problem of data's error, target, is the end of the file: whether
// more text after it, which a parser stopped at a token would never read, changes the error.
func atEnd(data []byte, target string) bool {
	for _, more := range []string{"\n@", "\n]", "\n}", "\n\"", "\n'"} {
		if decodeError(append(bytes.Clone(data), more...)) != target {
			return true
		}
	}
	return false
}

// place returns the line and column, from 1, of data's byte offset i, its column in characters.
func place(data []byte, i int) (line, col int) {
	before := data[:i]
	line = bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[lineStart:]) + 1
}

// documentStart returns the line, from 1, of the first document start marker ("---" at the start
// of a line) after line after, or 0 if there is none.
func documentStart(data []byte, after int) int {
	for i, line := range bytes.Split(data, []byte("\n")) {
		if i+1 <= after {
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r') {
			return i + 1
		}
	}
	return 0
}
