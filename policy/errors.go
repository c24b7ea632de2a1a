package policy

import (
	"fmt"
	"strings"
)

// An Error is one thing wrong with a configuration file, at a place in it.
type Error struct {
	// File is the file's name as given to Parse.
	File string
	// Line and Column are where the error is, counted from 1; 0 when it concerns the whole file.
	Line, Column int
	// Msg says what is wrong, starting with the path of the field, such as
	// "policies[1].limit: 0 is outside 1-1000000000000000".
	Msg string
}

// Error returns "file:line:column: msg", or "file: msg" for an error of the whole file.
func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// An ErrorList is every error found in a configuration file, in the order of their places in it.
// Parse returns one, as its error, when it finds any.
type ErrorList []*Error

// Error returns the errors' messages, one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
