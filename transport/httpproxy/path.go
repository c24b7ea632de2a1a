package httpproxy

import (
	"errors"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/admit-dev/admit/policy"
)

// NonCanonicalPathBody is the body of a 400 response to a request whose path is not in canonical
// form (see the package documentation): it is refused, never forwarded.
const NonCanonicalPathBody = "bad request: the path is not in canonical form\n"

// pathError returns the error that refuses a path, for why.
func pathError(why string) error {
	return errors.New("non-canonical path: " + why)
}

// checkPath reports whether a request of method for the decoded path p, sent as raw (the path as
// the client escaped it, or "" when that is p itself), may be matched against cfg's routes and
// forwarded as it is. It returns "" and nil when it may; the clean path (as ServeMux cleans it) to
// redirect to when p only needs cleaning; else an error that says why p is refused.
//
// A path may be forwarded when every server behind the proxy must read it as the same resource
// as the proxy does, so that the route matched on it is the route of that resource:
//   - it starts with '/';
//   - no '/', '.' or '\' is percent-encoded in it, once or twice (%2F, %2E, %5C, %252F …), and
//     it has no '\', no control character and no invalid UTF-8 once decoded;
//   - it is clean: no empty, "." or ".." segment (else the clean path is returned);
//   - no segment ends in a dot or a space, which Windows servers drop;
//   - if it has ;parameters, the path without them is canonical too, and matches the same route,
//     so that a server that drops them (Tomcat, Jetty, Spring) serves a resource of that route.
func checkPath(cfg *policy.Config, method, p, raw string) (clean string, err error) {
	if !strings.HasPrefix(p, "/") {
		return "", pathError("it does not start with /")
	}
	if raw == "" {
		raw = p
	}
	if encodesSeparator(raw) {
		return "", pathError("a /, . or \\ is percent-encoded")
	}
	if encodesSeparator(p) {
		return "", pathError("a /, . or \\ is percent-encoded twice")
	}
	if strings.ContainsRune(p, '\\') {
		return "", pathError("it has a backslash")
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", pathError("it has a control character")
	}
	if !utf8.ValidString(p) {
		return "", pathError("it is not UTF-8")
	}
	if c := cleanPath(p); c != p {
		return c, nil
	}
	if trailingDot(p) {
		return "", pathError("a segment ends in a dot or a space")
	}
	if !strings.Contains(p, ";") {
		return "", nil
	}
	bare := withoutParams(p)
	if cleanPath(bare) != bare || trailingDot(bare) {
		return "", pathError("without its ;parameters it is not clean")
	}
	a, aok := cfg.Route(method, p)
	b, bok := cfg.Route(method, bare)
	if aok != bok || aok && !sameDecision(a, b) {
		return "", pathError("with and without its ;parameters it matches different routes")
	}
	return "", nil
}

// cleanPath returns the canonical path of p, as ServeMux cleans it: path.Clean, with a trailing
// slash kept.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// encodesSeparator reports whether s percent-encodes '/', '.' or '\'.
func encodesSeparator(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		switch strings.ToLower(s[i+1 : i+3]) {
		case "2f", "2e", "5c":
			return true
		}
	}
	return false
}

// trailingDot reports whether a segment of the clean path p ends in a dot or a space.
func trailingDot(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " ") {
			return true
		}
	}
	return false
}

// withoutParams returns p with the ;parameters of each segment removed.
func withoutParams(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.Join(segs, "/")
}

// sameDecision reports whether routes a and b decide a request alike: the same policies, subject
// and cost.
func sameDecision(a, b policy.Route) bool {
	return slices.Equal(a.Policies, b.Policies) && a.Subject == b.Subject && a.Cost == b.Cost
}
