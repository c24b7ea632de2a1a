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
// ACLRules, and never one a KeyBuilder makes. The scripts' peeks write nothing; the permission probe
// writes keys under PreflightKey and deletes them before it returns.
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
// script entry point on every node (SCRIPT LOAD), sends every node WAIT 0 1 (a replicated
// policy's wait, answered at once), and runs each once on PreflightKey — take as a
// peek of every algorithm, release of a lease that does not exist, settle at the cost reserved on a
// missing key — all of which write nothing; then it runs a permission probe, a script that calls
// every command the scripts may call, once each, on keys under PreflightKey, and deletes what it
// wrote; then it runs the transaction the store falls back to on a second NOSCRIPT (MULTI, SCRIPT
// LOAD, EVALSHA of release, EXEC), writing nothing; on a cluster it also sends every node ASKING,
// which following an ASK redirect needs; then it reads maxmemory-policy. A command the user may not run is an error matching
// ErrPermission that names it (every one the probe found refused); a connection failure is one
// matching admit.ErrUnavailable. A maxmemory-policy that is not noeviction is a warning in the
// Report, and one the user may not read is PolicyUnknown.
//
// Why a probe: the scripts call most write commands only on some branches (DECRBY on a partial
// refund, ZREMRANGEBYSCORE once a lease has expired, HINCRBY on a second request in a window), so
// running the entry points once cannot reach them all without building state for each branch; and
// ACL DRYRUN, which would answer without running anything, needs a permission the least-privilege
// user does not have. A test checks that the probe calls exactly the commands ACLRules is derived
// from, so it cannot fall behind the scripts unnoticed.
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
	if err := preflightWait(ctx, c, s.commandTimeout); err != nil {
		return rep, err
	}
	if c.Mode() == rueidis.ClientModeCluster {
		if err := preflightAsking(ctx, c, s.commandTimeout); err != nil {
			return rep, err
		}
	}
	if err := s.preflightScripts(ctx); err != nil {
		// A read the scripts make with redis.pcall shows as corrupt state on the canary keys: the
		// probe names the command. A key pattern that does not cover the canary keys it cannot name.
		if perr := s.preflightProbe(ctx); errors.Is(perr, ErrPermission) && !strings.Contains(err.Error(), "~rl:*") {
			return rep, perr
		}
		return rep, err
	}
	if err := s.preflightProbe(ctx); err != nil {
		return rep, err
	}
	if err := s.preflightTransaction(ctx, c); err != nil {
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

// preflightWait sends WAIT 0 1 to every node, which answers at once: a replicated policy's
// decisions send WAIT (durable.go), which the user may then need to run.
func preflightWait(ctx context.Context, c rueidis.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for addr, node := range c.Nodes() {
		if err := node.Do(ctx, node.B().Wait().Numreplicas(0).Timeout(1).Build()).Error(); err != nil {
			return preflightError("WAIT on "+addr, err)
		}
	}
	return nil
}

// preflightAsking sends ASKING, then PING, to every node of a cluster: the client follows an ASK
// redirect (a slot migrating) with ASKING, which the user may then need to run. PING goes in the
// same round trip, so that the ASKING flag is spent on it, not on another caller's command.
func preflightAsking(ctx context.Context, c rueidis.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for addr, node := range c.Nodes() {
		for _, r := range node.DoMulti(ctx, node.B().Asking().Build(), node.B().Ping().Build()) {
			if err := r.Error(); err != nil {
				return preflightError("ASKING on "+addr, err)
			}
		}
	}
	return nil
}

// preflightTransaction runs the NOSCRIPT fallback's transaction (MULTI, SCRIPT LOAD, EVALSHA, EXEC;
// see run) once, with the release script on a lease of PreflightKey that does not exist, which
// writes nothing.
func (s *Store) preflightTransaction(ctx context.Context, c rueidis.Client) error {
	const step = "the NOSCRIPT fallback's transaction (MULTI, SCRIPT LOAD, EVALSHA, EXEC)"
	ctx, cancel := context.WithTimeout(ctx, s.commandTimeout)
	defer cancel()
	resps := sendTransaction(ctx, c, releaseScript, []string{PreflightKey + ":" + admit.Concurrency.String()}, []string{"1"})
	if err := resps[0].Error(); err != nil { // MULTI: transactionReply would accept the EVALSHA run alone
		return preflightError(step, err)
	}
	n, err := transactionReply(releaseScript, resps).AsInt64()
	if err != nil {
		return preflightError(step, err)
	}
	if n != 0 {
		return fmt.Errorf("redisstore: preflight: %s released %d leases of %s, want 0: %w", step, n, PreflightKey, admit.ErrUnavailable)
	}
	return nil
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

// probeCalls are the calls of the permission probe, in order: one of every command the scripts call,
// on a string, a hash and a sorted set key (KEYS[1], KEYS[2], KEYS[3]), each of which the calls
// leave deleted (DEL, or an expiry in the past when DEL is refused). A test checks that they name
// exactly the commands of ACLRules.
var probeCalls = [][]string{
	{"TIME"},
	{"SET", "KEYS[1]", "'1'"}, {"GET", "KEYS[1]"}, {"INCRBY", "KEYS[1]", "'2'"}, {"DECRBY", "KEYS[1]", "'1'"},
	{"PEXPIREAT", "KEYS[1]", "'4102444800000'"}, {"PTTL", "KEYS[1]"}, {"PEXPIRETIME", "KEYS[1]"}, {"DEL", "KEYS[1]"},
	{"HSET", "KEYS[2]", "'f'", "'1'"}, {"HINCRBY", "KEYS[2]", "'f'", "'1'"}, {"HGETALL", "KEYS[2]"},
	{"ZADD", "KEYS[3]", "'1'", "'a'", "'2'", "'b'"}, {"ZCARD", "KEYS[3]"}, {"ZCOUNT", "KEYS[3]", "'-inf'", "'+inf'"},
	{"ZRANGE", "KEYS[3]", "'0'", "'-1'", "'WITHSCORES'"}, {"ZREM", "KEYS[3]", "'a'"},
	{"ZREMRANGEBYSCORE", "KEYS[3]", "'-inf'", "'+inf'"},
}

// probeScript is the permission probe: it calls each of probeCalls with redis.pcall, and returns
// the commands refused for want of a permission, and the other errors, each joined by spaces.
var probeScript = newScript("permission probe", probeSource())

// probeSource renders probeCalls as the probe's Lua source.
func probeSource() string {
	var b strings.Builder
	b.WriteString(`local refused, failed = {}, {}
local function try(cmd, ...)
  local r = redis.pcall(cmd, ...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'NOPERM', 1, true) or string.find(r.err, "can't run this command", 1, true) then
      refused[#refused + 1] = string.lower(cmd)
    else
      failed[#failed + 1] = string.lower(cmd) .. ': ' .. r.err
    end
  end
end
`)
	for _, c := range probeCalls {
		fmt.Fprintf(&b, "try('%s'", c[0])
		for _, a := range c[1:] {
			b.WriteString(", " + a)
		}
		b.WriteString(")\n")
	}
	b.WriteString(`for _, k in ipairs(KEYS) do
  local r = redis.pcall('DEL', k)
  if type(r) == 'table' and r.err then
    redis.pcall('PEXPIREAT', k, '1')
  end
end
return {table.concat(refused, ' '), table.concat(failed, '; ')}
`)
	return b.String()
}

// preflightProbe runs the permission probe on keys under PreflightKey.
func (s *Store) preflightProbe(ctx context.Context) error {
	keys := []string{PreflightKey + ":probe:string", PreflightKey + ":probe:hash", PreflightKey + ":probe:zset"}
	ctx, cancel := context.WithTimeout(ctx, s.commandTimeout)
	defer cancel()
	msg, err := s.run(ctx, probeScript, keys, nil)
	if err != nil {
		return scriptPreflightError(probeScript, err)
	}
	reply, err := msg.AsStrSlice()
	if err != nil || len(reply) != 2 {
		return fmt.Errorf("redisstore: preflight: the %s answered %v (%v): %w", probeScript.name, reply, err, admit.ErrUnavailable)
	}
	if reply[0] != "" {
		cmds := strings.Fields(reply[0])
		for i, c := range cmds {
			cmds[i] = "'" + c + "'"
		}
		return fmt.Errorf("%w: the %s was refused: the user may not run %s", ErrPermission, probeScript.name, strings.Join(cmds, ", "))
	}
	if reply[1] != "" {
		return fmt.Errorf("redisstore: preflight: the %s on %s:probe:*: %s: %w", probeScript.name, PreflightKey, reply[1], admit.ErrUnavailable)
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
		return fmt.Errorf("%w: %s refused: %s%s", ErrPermission, step, msg[i:], topologyHint(msg))
	}
	if !errors.Is(err, admit.ErrUnavailable) && !errors.Is(err, admit.ErrCorruptState) && !errors.Is(err, admit.ErrInvalidRequest) {
		err = unavailable(err)
	}
	return fmt.Errorf("redisstore: preflight: %s: %w", step, err)
}

// clusterACLRules are the rules a cluster node's user needs besides ACLRules: CLUSTER SLOTS (Redis
// 7) or CLUSTER SHARDS (Redis 8) to read the topology, ASKING to follow an ASK redirect while a slot
// migrates. docs/running-redis.md gives them; a test keeps them equal to the harness's.
const clusterACLRules = "+cluster|slots +cluster|shards +asking"

// topologyHint explains a refused command that the client, not the scripts, needs: ROLE under
// Sentinel, CLUSTER SLOTS or SHARDS in a cluster (the client sends it while connecting, so Redis
// refuses it in reply to whatever came first, such as PING), ASKING in a cluster.
func topologyHint(msg string) string {
	switch {
	case strings.Contains(msg, "'role'"):
		return " (under Sentinel the client asks the primary ROLE: the user needs +role besides the scripts' rules)"
	case strings.Contains(msg, "'cluster|slots'"), strings.Contains(msg, "'cluster|shards'"):
		return " (in a cluster the client reads the topology: the user needs " + clusterACLRules + " besides the scripts' rules)"
	case strings.Contains(msg, "'asking'"):
		return " (in a cluster the client follows ASK redirects while a slot migrates: the user needs " + clusterACLRules + " besides the scripts' rules)"
	}
	return ""
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
		for _, src := range scriptSources() {
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
