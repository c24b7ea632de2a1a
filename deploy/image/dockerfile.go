package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// A spec is what the final stage of a Dockerfile says of its image: the files it copies in and
// the configuration it sets. It is the one source of the image's configuration: imagebuild
// writes what the Dockerfile says, and the tests compare the image with it.
type spec struct {
	User       string
	WorkingDir string
	Entrypoint []string
	Cmd        []string
	Env        []string          // NAME=value, in the order set
	Exposed    []string          // "8080/tcp", in the order given
	Labels     map[string]string // after ARG substitution
	Copies     []string          // the absolute destination of each COPY, in order
}

// readSpec reads the Dockerfile at path and returns the spec of its final stage, with the build
// arguments args (NAME=value) in place of the ARG defaults.
func readSpec(path string, args map[string]string) (spec, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return spec{}, err
	}
	s, err := parseSpec(string(text), args)
	if err != nil {
		return spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseSpec returns the spec of the final stage of the Dockerfile text. It knows the instructions
// of a final stage that needs no shell: ARG, ENV, LABEL, USER, WORKDIR, EXPOSE, COPY, and
// ENTRYPOINT and CMD in their JSON (exec) form; any other one there is an error.
func parseSpec(text string, args map[string]string) (spec, error) {
	var final []instruction // the instructions after the last FROM
	stages := 0
	for _, in := range instructions(text) {
		word, _, _ := strings.Cut(in.text, " ")
		switch word = strings.ToUpper(word); {
		case word == "FROM":
			stages++
			final = nil
		case stages == 0 && word != "ARG":
			return spec{}, fmt.Errorf("line %d: %s before FROM", in.line, word)
		case stages > 0:
			final = append(final, in)
		}
	}
	if stages == 0 {
		return spec{}, fmt.Errorf("no FROM")
	}
	s, vars := spec{Labels: map[string]string{}}, map[string]string{}
	for _, in := range final {
		word, rest, _ := strings.Cut(in.text, " ")
		word, rest = strings.ToUpper(word), strings.TrimSpace(rest)
		if err := s.apply(word, rest, vars, args); err != nil {
			return spec{}, fmt.Errorf("line %d: %s: %w", in.line, word, err)
		}
	}
	return s, nil
}

// apply applies one instruction of the final stage (so far) to s. vars holds the stage's ARG and
// ENV values, for substitution; args the build arguments given.
func (s *spec) apply(word, rest string, vars, args map[string]string) error {
	switch word {
	case "ARG":
		name, def, _ := strings.Cut(rest, "=")
		if v, ok := args[name]; ok {
			def = v
		}
		vars[name] = unquote(def)
	case "ENV", "LABEL":
		pairs, err := keyValues(rest)
		if err != nil {
			return err
		}
		for _, kv := range pairs {
			v := expand(kv[1], vars)
			if word == "LABEL" {
				s.Labels[kv[0]] = v
				continue
			}
			vars[kv[0]] = v
			s.Env = slices.DeleteFunc(s.Env, func(e string) bool { return strings.HasPrefix(e, kv[0]+"=") })
			s.Env = append(s.Env, kv[0]+"="+v)
		}
	case "USER":
		s.User = expand(rest, vars)
	case "WORKDIR":
		s.WorkingDir = expand(rest, vars)
	case "EXPOSE":
		for _, p := range strings.Fields(rest) {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			if !portRE.MatchString(p) {
				return fmt.Errorf("%q: want PORT or PORT/tcp or PORT/udp", p)
			}
			s.Exposed = append(s.Exposed, p)
		}
	case "ENTRYPOINT", "CMD":
		var argv []string
		if err := json.Unmarshal([]byte(rest), &argv); err != nil || len(argv) == 0 {
			return fmt.Errorf("want the exec form, a JSON array of strings: the image has no shell")
		}
		if word == "CMD" {
			s.Cmd = argv
		} else {
			s.Entrypoint, s.Cmd = argv, nil // as Docker does: a new ENTRYPOINT resets CMD
		}
	case "COPY":
		f := strings.Fields(rest)
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			f = f[1:]
		}
		if len(f) != 2 || !strings.HasPrefix(f[1], "/") || strings.HasSuffix(f[1], "/") {
			return fmt.Errorf("want COPY [--from=STAGE] SOURCE /DESTINATION, one file to an absolute file path")
		}
		s.Copies = append(s.Copies, f[1])
	default:
		return fmt.Errorf("not allowed in the final stage: the image has no shell and imagebuild knows ARG, ENV, LABEL, USER, WORKDIR, EXPOSE, COPY, ENTRYPOINT and CMD")
	}
	return nil
}

// portRE matches an EXPOSE port with its protocol.
var portRE = regexp.MustCompile(`^[1-9][0-9]{0,4}/(tcp|udp)$`)

// An instruction is one logical line of a Dockerfile, continuations joined.
type instruction struct {
	line int // of its first physical line
	text string
}

// instructions splits a Dockerfile into its instructions, skipping comments and blank lines and
// joining the lines that end in a backslash.
func instructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		more := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		if more {
			cur.WriteString(" ")
			continue
		}
		out = append(out, instruction{line: start, text: strings.Join(strings.Fields(cur.String()), " ")})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, instruction{line: start, text: strings.TrimSpace(cur.String())})
	}
	return out
}

// keyValues splits the pairs of an ENV or LABEL instruction, KEY=VALUE KEY="VALUE" …, the values
// unquoted.
func keyValues(rest string) ([][2]string, error) {
	var pairs [][2]string
	for _, m := range pairRE.FindAllStringSubmatch(rest, -1) {
		pairs = append(pairs, [2]string{m[1], unquote(m[2])})
	}
	if len(pairs) == 0 || strings.TrimSpace(pairRE.ReplaceAllString(rest, "")) != "" {
		return nil, fmt.Errorf("%q: want KEY=VALUE pairs", rest)
	}
	return pairs, nil
}

// pairRE matches one KEY=VALUE of an ENV or LABEL instruction, the value bare or double-quoted.
var pairRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.\-]*)=("(?:[^"\\]|\\.)*"|[^\s"]*)`)

// unquote removes the double quotes around v, if any.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`)
	}
	return v
}

// expand replaces $NAME and ${NAME} in v with their values in vars ("" when unset).
func expand(v string, vars map[string]string) string {
	return os.Expand(v, func(name string) string { return vars[name] })
}
