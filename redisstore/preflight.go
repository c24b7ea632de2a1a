package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
)

// ErrPermission means Redis refused a command the store needs (a NOPERM reply): the ACL user lacks
// a command, or its key pattern does not cover the keys. Errors matching it name what was refused.
var ErrPermission = errors.New("redisstore: permission denied")

// PreflightKey is the canary key Preflight runs the scripts on: inside ~rl:*, the key pattern of
// ACLRules, and never one a KeyBuilder makes. Preflight writes nothing to it.
const PreflightKey = "rl:preflight:{canary}"

// PolicyUnknown is the Report's MaxmemoryPolicy when the user may not read it (CONFIG GET is not
// among ACLRules) or the server does not answer CONFIG GET.
const PolicyUnknown = "unknown"

// A Report is what Preflight found out besides errors.
type Report struct {
	// MaxmemoryPolicy is Redis's maxmemory-policy, or PolicyUnknown.
	MaxmemoryPolicy string
	// Warnings are problems that do not stop the store from working, such as a maxmemory-policy
	// other than noeviction: Redis may then evict limit state, which resets limits.
	Warnings []string
}

// Preflight checks, before any decision, that the store can work: it pings Redis, loads every
// script entry point on every node (SCRIPT LOAD), and runs each once on PreflightKey — take as a
// peek of every algorithm, release of a lease that does not exist, settle at the cost reserved on a
// missing key — all of which write nothing; then it reads maxmemory-policy. A NOPERM reply is an
// error matching ErrPermission that names the command and key refused; a connection failure is one
// matching admit.ErrUnavailable. A maxmemory-policy that is not noeviction is a warning in the
// Report, and one the user may not read is PolicyUnknown. The peeks exercise the commands the
// scripts call to read state, not those they call only to write (a write-only permission that is
// missing shows at the first admitted decision).
func (s *Store) Preflight(ctx context.Context) (Report, error) {
	rep := Report{MaxmemoryPolicy: PolicyUnknown}
	if err := s.Ping(ctx); err != nil {
		return rep, preflightError("PING", err)
	}
	c, err := s.conn(ctx)
	if err != nil {
		return rep, fmt.Errorf("redisstore: preflight: %w", err)
	}
	for _, sc := range []*script{takeScript, releaseScript, settleScript} {
		lctx, cancel := context.WithTimeout(ctx, s.commandTimeout)
		err := load(lctx, c, sc)
		cancel()
		if err != nil {
			return rep, preflightError("SCRIPT LOAD of the "+sc.name+" script", err)
		}
	}
	if err := s.preflightScripts(ctx); err != nil {
		return rep, err
	}
	rep.MaxmemoryPolicy, err = s.maxmemoryPolicy(ctx, c)
	if err != nil {
		return rep, preflightError("CONFIG GET maxmemory-policy", err)
	}
	if rep.MaxmemoryPolicy != PolicyUnknown && rep.MaxmemoryPolicy != "noeviction" {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"maxmemory-policy is %s, not noeviction: under memory pressure Redis may evict limit state, which resets limits",
			rep.MaxmemoryPolicy))
	}
	return rep, nil
}

// preflightScripts runs each entry point once on PreflightKey, writing nothing.
func (s *Store) preflightScripts(ctx context.Context) error {
	algs := []admit.Algorithm{admit.FixedWindow, admit.SlidingWindow, admit.SlidingLog, admit.GCRA, admit.Concurrency}
	rs := make([]admit.Request, len(algs))
	for i, a := range algs {
		rs[i] = admit.Request{Key: PreflightKey + ":" + a.String(), Limit: admit.Limit{Algorithm: a, Rate: 1, Period: time.Second}}
	}
	ds := make([]admit.Decision, len(rs))
	if _, err := s.TakeAll(ctx, rs, ds); err != nil {
		return scriptPreflightError(takeScript, err)
	}
	conc := rs[len(rs)-1]
	if err := s.Release(ctx, admit.Lease{Key: conc.Key, Limit: conc.Limit, Token: 1}); err != nil {
		return scriptPreflightError(releaseScript, err)
	}
	res := admit.Reservation{Request: rs[0], Token: 1} // a window long gone
	res.Request.Cost = 1
	if _, err := s.Settle(ctx, res, 1); err != nil { // actual = reserved: nothing to settle
		return scriptPreflightError(settleScript, err)
	}
	return nil
}

// maxmemoryPolicy reads maxmemory-policy: PolicyUnknown when Redis refuses CONFIG GET (NOPERM, a
// disabled or renamed command), an error when Redis does not answer.
func (s *Store) maxmemoryPolicy(ctx context.Context, c rueidis.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.commandTimeout)
	defer cancel()
	m, err := c.Do(ctx, c.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	if err != nil {
		var re *rueidis.RedisError
		if errors.As(err, &re) {
			return PolicyUnknown, nil
		}
		return "", unavailable(err)
	}
	if p, ok := m["maxmemory-policy"]; ok && p != "" {
		return p, nil
	}
	return PolicyUnknown, nil
}

// preflightError classifies err from step: a NOPERM reply, anywhere in its chain or text (a script's
// error carries Redis's message), as ErrPermission naming step and Redis's message; anything else
// as it is, under the step's name.
func preflightError(step string, err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "NOPERM"); i >= 0 {
		if strings.Contains(msg, "keys") {
			return fmt.Errorf("%w: %s refused: %s (the canary keys are %s:*; the user's key pattern must cover ~rl:*)",
				ErrPermission, step, msg[i:], PreflightKey)
		}
		return fmt.Errorf("%w: %s refused: %s", ErrPermission, step, msg[i:])
	}
	if !errors.Is(err, admit.ErrUnavailable) && !errors.Is(err, admit.ErrCorruptState) && !errors.Is(err, admit.ErrInvalidRequest) {
		err = unavailable(err)
	}
	return fmt.Errorf("redisstore: preflight: %s: %w", step, err)
}

// scriptLine matches where Redis says a script's refused call is: "… on @user_script:LINE.".
var scriptLine = regexp.MustCompile(`@user_script:(\d+)`)

// pcalls matches a call the scripts make with redis.pcall, whose errors they read as corrupt state.
var pcalls = regexp.MustCompile(`redis\.pcall\(\s*'([A-Za-z|]+)'`)

// scriptPreflightError classifies err from running sc on the canary keys. Redis 7.0 reports a
// command refused inside a script as "The user executing the script can't run this command …
// @user_script:LINE" without NOPERM: it is a permission problem, and the line names the command.
// A corrupt-state reply on the canary keys, which nothing writes, means a command the scripts call
// with redis.pcall (reading a key's type from its error) was refused.
func scriptPreflightError(sc *script, err error) error {
	step := "the " + sc.name + " script"
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOPERM"):
	case strings.Contains(msg, "can't run this command"):
		cmd := "a command"
		if m := scriptLine.FindStringSubmatch(msg); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 1 {
				if lines := strings.Split(sc.src, "\n"); n <= len(lines) {
					if c := scriptCalls.FindStringSubmatch(lines[n-1]); c != nil && c[2] != "" {
						cmd = "'" + strings.ToLower(c[2]) + "'"
					}
				}
			}
		}
		return fmt.Errorf("%w: %s refused: the user may not run %s: %s", ErrPermission, step, cmd, msg)
	case errors.Is(err, admit.ErrCorruptState):
		var cmds []string
		for _, src := range append(append([]string{preludeSrc}, entryPoints...), modules...) {
			for _, m := range pcalls.FindAllStringSubmatch(src, -1) {
				if c := strings.ToLower(m[1]); !slices.Contains(cmds, c) {
					cmds = append(cmds, c)
				}
			}
		}
		slices.Sort(cmds)
		return fmt.Errorf("%w: %s found corrupt state on the canary keys, which nothing writes: the user may not run one of %s: %s",
			ErrPermission, step, strings.Join(cmds, ", "), msg)
	}
	return preflightError(step, err)
}
