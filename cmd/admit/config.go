package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/admit-dev/admit/internal/clienttoken"
	"github.com/admit-dev/admit/internal/tlsconf"
	"github.com/admit-dev/admit/policy"
)

const configUsage = `Usage: admit config validate FILE

Reads the configuration file FILE — policies, routes and server settings — and reports every error
in it at once, one per line as FILE:LINE:COLUMN: message, on stderr; then, for a file without
them, the files that server.tls and server.client_tokens_file name: each one that cannot be read
or used is one line, FILE: field: message. It touches no backend.

Exit status: 0 when the file is valid, 1 when it is not (or cannot be read), 2 for a wrong command
line. The file's format: docs/configuration.md.
`

// config runs admit config with args (after "config").
func config(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h" || args[0] == "help") {
		fmt.Fprint(stdout, configUsage)
		return exitOK
	}
	switch {
	case len(args) == 0:
		return badUsage(stderr, "config", "want: admit config validate FILE")
	case args[0] != "validate":
		return badUsage(stderr, "config", "unknown subcommand %q: want validate FILE", args[0])
	case len(args) == 1:
		return badUsage(stderr, "config validate", "want one FILE: admit config validate FILE")
	case len(args) > 2:
		return badUsage(stderr, "config validate", "unexpected argument %q: want one FILE: admit config validate FILE", args[2])
	}
	file := args[1]
	cfg, err := policy.Load(file)
	if err != nil {
		var list policy.ErrorList
		if errors.As(err, &list) {
			fmt.Fprintln(stderr, err)
			fmt.Fprintf(stderr, "admit config validate: %s: %d %s\n", file, len(list), plural(len(list), "error", "errors"))
		} else {
			fmt.Fprintf(stderr, "admit config validate: %v\n", err)
		}
		return exitError
	}
	if errs := fileErrors(cfg.Server); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", file, err)
		}
		fmt.Fprintf(stderr, "admit config validate: %s: %d %s\n", file, len(errs), plural(len(errs), "error", "errors"))
		return exitError
	}
	tiers := ""
	if n := countTiers(cfg); n > 0 {
		tiers = fmt.Sprintf(", %d %s", n, plural(n, "tier", "tiers"))
	}
	fmt.Fprintf(stdout, "%s: valid: %d %s%s, %d %s\n", file, len(cfg.Policies), plural(len(cfg.Policies), "policy", "policies"),
		tiers, len(cfg.Routes), plural(len(cfg.Routes), "route", "routes"))
	return exitOK
}

// fileErrors returns the errors of the files the server settings name and admit serve reads at
// start: server.tls's and server.client_tokens_file. (server.hmac_secret_file gives way to a flag
// or the environment, and is checked when admit serve starts.)
func fileErrors(s policy.Server) []error {
	var errs []error
	if s.TLS.Enabled() {
		if err := tlsconf.Check(tlsFiles(s.TLS)); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ClientTokensFile != "" {
		if err := clienttoken.Check(s.ClientTokensFile); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// countTiers returns the number of tiers of cfg's policies.
func countTiers(cfg *policy.Config) int {
	n := 0
	for _, p := range cfg.Policies {
		n += len(p.Tiers)
	}
	return n
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
