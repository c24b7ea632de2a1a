package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
)

// A script is one Lua file and its SHA1, the name EVALSHA calls it by.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// The Lua sources: a prelude, one module per algorithm, and the entry points, each assembled into
// one script (scripts are files, assembled from modules, one SHA per entry point: docs/redis.md, "Scripts").
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/fixed_window.lua
	fixedWindowSrc string
	//go:embed scripts/sliding_window.lua
	slidingWindowSrc string
	//go:embed scripts/sliding_log.lua
	slidingLogRaw string
	//go:embed scripts/gcra.lua
	gcraSrc string
	//go:embed scripts/concurrency.lua
	concurrencySrc string
	//go:embed scripts/take.lua
	takeSrc string
	//go:embed scripts/take_single.lua
	takeSingleRaw string
	//go:embed scripts/settle_single.lua
	settleSingleRaw string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/settle.lua
	settleSrc string
)

// The sources that ask for inline fragments, spliced in (expandInline): the straight paths, and the
// sliding log's module, whose writes they repeat.
var (
	takeSingleSrc   = expandInline("take_single.lua", takeSingleRaw)
	settleSingleSrc = expandInline("settle_single.lua", settleSingleRaw)
	slidingLogSrc   = expandInline("sliding_log.lua", slidingLogRaw)
)

// inlineFS holds the inline fragments, scripts/inline/<name>.lua: a piece of Lua that the straight
// paths repeat (among themselves, or from a module), written once. They cannot share it as a
// function: in Redis's Lua every function is a closure made anew on every call, which costs more
// than the piece itself (BENCHMARKS.md, "What keeps the straight paths honest"). So a line
//
//	--@inline <name>
//
// asks for the fragment <name> where it stands, and expandInline splices in its text, each line
// indented as the marker is: the assembled script runs the same statements as if they were written
// there. A fragment has no parameters; its header comment (the comment lines it starts with, left
// out of the splice) names the locals it reads and sets, which every site declares under those names.
//
//go:embed scripts/inline/*.lua
var inlineFS embed.FS

// inlineMarker matches a line that asks for an inline fragment: its indentation and the name.
var inlineMarker = regexp.MustCompile(`(?m)^([ \t]*)--@inline ([a-z_]+)[ \t]*$`)

// inlineFragment returns the Lua of the fragment name, its header comment left out, and whether
// there is such a fragment.
func inlineFragment(name string) (string, bool) {
	b, err := inlineFS.ReadFile("scripts/inline/" + name + ".lua")
	if err != nil {
		return "", false
	}
	lines := strings.SplitAfter(string(b), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "--") {
		lines = lines[1:]
	}
	return strings.Join(lines, ""), true
}

// expandInline returns src, a script file (a straight path, or a module), with every --@inline marker replaced by its
// fragment, indented as the marker; a fragment's own markers too (gcra_read asks for clock_us). A
// marker naming no fragment, and fragments asking for each other in a circle, are bugs in the
// scripts: they panic, when the package is initialised (a test holds every marker and fragment to
// each other).
func expandInline(file, src string) string {
	return expandInlineDepth(file, src, 0)
}

// maxInlineDepth is how deep fragments may ask for fragments.
const maxInlineDepth = 4

// expandInlineDepth is expandInline of src at depth, how many fragments deep src stands.
func expandInlineDepth(file, src string, depth int) string {
	if depth > maxInlineDepth {
		panic(fmt.Sprintf("redisstore: inline fragments nested deeper than %d at %s: do they ask for each other?", maxInlineDepth, file))
	}
	return inlineMarker.ReplaceAllStringFunc(src, func(line string) string {
		m := inlineMarker.FindStringSubmatch(line)
		frag, ok := inlineFragment(m[2])
		if !ok {
			panic(fmt.Sprintf("redisstore: %s asks for the inline fragment %q, which scripts/inline does not hold", file, m[2]))
		}
		frag = expandInlineDepth(m[2]+".lua", frag, depth+1)
		var b strings.Builder
		for l := range strings.SplitAfterSeq(strings.TrimSuffix(frag, "\n"), "\n") {
			if strings.TrimSpace(l) != "" {
				b.WriteString(m[1])
			}
			b.WriteString(strings.TrimSuffix(l, "\n"))
			b.WriteString("\n")
		}
		return strings.TrimSuffix(b.String(), "\n")
	})
}

// modules are the algorithm modules, in the order the scripts define them.
var modules = []string{fixedWindowSrc, gcraSrc, slidingWindowSrc, slidingLogSrc, concurrencySrc}

// takeScript is the entry point that decides 1 … admit.MaxRequests policies all-or-nothing.
var takeScript = newScript("take", assemble(takeSrc, false))

// releaseScript is the entry point that ends one lease of a concurrency key.
var releaseScript = newScript("release", assemble(releaseSrc, false))

// settleScript is the entry point that settles one reservation.
var settleScript = newScript("settle", assemble(settleSrc, false))

// entryPoints are the entry points' sources, their straight paths among them.
var entryPoints = []string{takeSingleSrc, takeSrc, releaseSrc, settleSingleSrc, settleSrc}

// straightPaths are the parts of the entry points that run before the prelude: the take script's
// single-policy path, the settle script's straight path (take_single.lua, settle_single.lua). Each
// decides the common calls itself and returns before the rest of the script runs, or falls through
// to it, having written nothing. Their source repeats no piece: each is written once, as an inline
// fragment (inlineFS) spliced in where a --@inline marker asks for it, before the SHA is taken.
var straightPaths = map[string]string{takeSrc: takeSingleSrc, settleSrc: settleSingleSrc}

// assemble returns the script of an entry point: the rendered constants, its straight path if it has
// one (straightPaths), the prelude, every algorithm module, then the entry point itself. A test assembly (testClock) reads the time from its
// last argument, Unix microseconds, instead of Redis's TIME, so that tests can fix it; production
// scripts read Redis's clock only.
func assemble(entry string, testClock bool) string {
	var b strings.Builder
	b.WriteString(constants())
	b.WriteString(gcraConstants()) // before the straight paths, which decide gcra too
	fmt.Fprintf(&b, "local CLOCK_FROM_ARGV = %t\n", testClock)
	b.WriteString(straightPaths[entry])
	b.WriteString(preludeSrc)
	for _, m := range modules {
		b.WriteString(m)
	}
	b.WriteString(entry)
	return b.String()
}

// constants returns the Lua that defines the bounds every script checks, rendered from the Go
// constants so that Go and Lua share one source of truth:
//
//	MAX           the largest limit, count or cost: admit.MaxRate
//	MAX_WINDOW    the longest window in milliseconds: admit.MaxPeriod
//	MAX_DIGITS    the most decimal digits either may have
//	MAX_REQUESTS  the most policies one call decides: admit.MaxRequests
//	MAX_LOG       the largest limit of a sliding log, and the most entries its key holds: admit.MaxSlidingLogRate
//	MAX_LEASES    the largest limit of a concurrency key, and the most leases it holds: admit.MaxConcurrency
func constants() string {
	maxWindow := admit.MaxPeriod.Milliseconds()
	digits := max(len(strconv.FormatInt(admit.MaxRate, 10)), len(strconv.FormatInt(maxWindow, 10)))
	return fmt.Sprintf("local MAX = %d\nlocal MAX_WINDOW = %d\nlocal MAX_DIGITS = %d\nlocal MAX_REQUESTS = %d\n",
		admit.MaxRate, maxWindow, digits, admit.MaxRequests) +
		fmt.Sprintf("local MAX_LOG = %d\nlocal MAX_LEASES = %d\n", admit.MaxSlidingLogRate, admit.MaxConcurrency)
}

// Error-reply prefixes the scripts raise before any write.
const (
	invalidPrefix = "ADMIT_INVALID"
	corruptPrefix = "ADMIT_CORRUPT"
)

// run calls sc with EVALSHA. On NOSCRIPT (Redis restarted, SCRIPT FLUSH, a new node, a promoted
// replica) it loads the script on the node the client routes the first key's slot to and calls
// EVALSHA once more; if that too meets NOSCRIPT, it sends MULTI, SCRIPT LOAD, EVALSHA, EXEC as one
// transaction (evalshaInTransaction). NOSCRIPT proves a call did not run, so the call that runs is
// the only one: nothing is counted twice. Nothing else is retried.
//
// The second NOSCRIPT comes from a node the client reaches only by a redirect. After a cluster
// failover that is the promoted replica (Redis 7 never passes SCRIPT LOAD to replicas): until the
// client refreshes its view of the cluster, up to a second later, it reaches the new master only by
// the old master's MOVED; neither its route for the slot nor its list of nodes (Nodes, which leaves
// out seed connections to replicas) names it. While a slot migrates, it is the target of an ASK.
// SCRIPT LOAD has no key to be redirected by; the transaction has, its EVALSHA's, and the client
// moves a whole MULTI … EXEC to the node a MOVED or ASK names, so the script is loaded where the
// call runs, within the call, and later EVALSHAs find it there. The least-privilege user may run
// MULTI and EXEC (ACLRules), never EVAL (docs/redis.md, "Least privilege": EVALSHA and SCRIPT LOAD only).
func (s *Store) run(ctx context.Context, sc *script, keys, args []string) (rueidis.RedisMessage, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	evalsha := func() rueidis.RedisResult {
		return c.Do(ctx, c.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	res := evalsha()
	if isNoScript(res.Error()) {
		if err := loadFor(ctx, c, sc, keys); err != nil {
			return rueidis.RedisMessage{}, unavailable(fmt.Errorf("loading %s script: %w", sc.name, err))
		}
		res = evalsha()
		if isNoScript(res.Error()) {
			res = evalshaInTransaction(ctx, c, sc, keys, args)
		}
	}
	msg, err := res.ToMessage()
	if err != nil {
		return rueidis.RedisMessage{}, scriptError(err)
	}
	return msg, nil
}

// evalshaInTransaction sends MULTI, SCRIPT LOAD of sc, EVALSHA of sc on keys and args, EXEC in one
// round trip, routed by the slot of keys (sendTransaction), and returns the EVALSHA's reply
// (transactionReply).
func evalshaInTransaction(ctx context.Context, c rueidis.Client, sc *script, keys, args []string) rueidis.RedisResult {
	return transactionReply(sc, sendTransaction(ctx, c, sc, keys, args))
}

// sendTransaction sends MULTI, SCRIPT LOAD of sc, EVALSHA of sc on keys and args, EXEC with one
// DoMulti and returns the four replies. The client routes the commands by the EVALSHA's slot (the
// others have none). On a cluster a MOVED or ASK of the queued EVALSHA aborts the transaction where
// it was sent, unrun (EXECABORT), and the client sends the whole MULTI … EXEC again to the node
// named (after ASKING, for an ASK): there the script is loaded and run in one atomic step, so it
// cannot meet NOSCRIPT.
func sendTransaction(ctx context.Context, c rueidis.Client, sc *script, keys, args []string) []rueidis.RedisResult {
	return c.DoMulti(ctx,
		c.B().Multi().Build(),
		c.B().ScriptLoad().Script(sc.src).Build(),
		c.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
		c.B().Exec().Build())
}

// transactionReply returns the EVALSHA's reply out of resps, sendTransaction's: its element of
// EXEC's array, which run parses as it parses a lone EVALSHA's reply. A transaction with a command
// refused while queued, or an aborted EXEC, ran nothing: the first error is the reply. If MULTI
// itself was refused (a user without +multi), Redis ran SCRIPT LOAD and EVALSHA on their own, at
// most once each: the EVALSHA's reply is then the call's if it has one, else MULTI's error.
func transactionReply(sc *script, resps []rueidis.RedisResult) rueidis.RedisResult {
	if resps[0].Error() != nil {
		if resps[2].Error() == nil {
			return resps[2]
		}
		return resps[0]
	}
	for _, r := range resps[1:] {
		if r.Error() != nil {
			return r
		}
	}
	replies, err := resps[3].ToArray()
	if err != nil || len(replies) != 2 {
		return rueidis.NewErrorResult(fmt.Errorf("EXEC of the %s script's transaction answered %d replies (%v), want 2", sc.name, len(replies), err))
	}
	if sha, err := replies[0].ToString(); err != nil || sha != sc.sha {
		return rueidis.NewErrorResult(fmt.Errorf("SCRIPT LOAD in a transaction returned %s (%v), want %s", sha, err, sc.sha))
	}
	return rueidis.NewResult(replies[1], nil)
}

// loadFor runs SCRIPT LOAD of sc on the node the client routes the slot of keys, a call's keys, to
// (on a cluster: by its current view; a standalone or Sentinel client has one node), or, without
// keys, on any node.
func loadFor(ctx context.Context, c rueidis.Client, sc *script, keys []string) error {
	cmd := c.B().ScriptLoad().Script(sc.src).Build()
	if len(keys) > 0 {
		cmd = cmd.SetSlot(keys[0])
	}
	return loadOn(ctx, c, cmd, sc)
}

// load runs SCRIPT LOAD on every node the client knows (Preflight's check that every node takes
// the scripts).
func load(ctx context.Context, c rueidis.Client, sc *script) error {
	for addr, node := range c.Nodes() {
		if err := loadOn(ctx, node, node.B().ScriptLoad().Script(sc.src).Build(), sc); err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
	}
	return nil
}

// loadOn runs cmd, a SCRIPT LOAD of sc, on c and checks the SHA1 it answers.
func loadOn(ctx context.Context, c rueidis.Client, cmd rueidis.Completed, sc *script) error {
	sha, err := c.Do(ctx, cmd).ToString()
	if err != nil {
		return err
	}
	if sha != sc.sha {
		return fmt.Errorf("SCRIPT LOAD returned %s, want %s", sha, sc.sha)
	}
	return nil
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// scriptError classifies an error from a script call: the script's own ADMIT_INVALID and
// ADMIT_CORRUPT replies, or anything else as unavailable.
func scriptError(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, corruptPrefix):
			return fmt.Errorf("%w: %s", admit.ErrCorruptState, strings.TrimSpace(strings.TrimPrefix(msg, corruptPrefix)))
		case strings.HasPrefix(msg, invalidPrefix):
			return fmt.Errorf("%w: script refused: %s", admit.ErrInvalidRequest, strings.TrimSpace(strings.TrimPrefix(msg, invalidPrefix)))
		}
	}
	return unavailable(err)
}

// unavailable wraps err so that it matches admit.ErrUnavailable.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
}

// takeArgs returns the KEYS and ARGV of the take script for rs: each policy's key, then the record's
// key for a request with an ID; the policy count, the fingerprint (” without an ID), then each
// policy's algorithm and arguments. It fills tokens, of len(rs) elements, with the lease each
// Request acquires if admitted, made by src (see algo.LeaseTokens), or 0.
func takeArgs(rs []admit.Request, src *algo.TokenSource, tokens []uint64) (keys, args []string) {
	return appendTakeArgs(make([]string, 0, len(rs)+1), make([]string, 0, 3+takeArgsPerPolicy*len(rs)), rs, src, tokens)
}

// takeArgsPerPolicy is the most arguments policyArgs appends for one policy.
const takeArgsPerPolicy = 5

// appendTakeArgs is takeArgs appending to keys and args, so that a caller can build them in arrays
// of its own, on its stack: the decision path allocates nothing for them.
func appendTakeArgs(keys, args []string, rs []admit.Request, src *algo.TokenSource, tokens []uint64) ([]string, []string) {
	id := rs[0].ID
	fp := ""
	if id != "" {
		fp = algo.Fingerprint(rs)
	}
	algo.LeaseTokens(src, rs, fp, tokens)
	args = append(args, formatInt(int64(len(rs))), fp, shadowMask(rs))
	for i := range rs {
		r := &rs[i]
		keys = append(keys, r.Key)
		args = policyArgs(args, r, tokens[i])
	}
	if id != "" {
		keys = append(keys, algo.RecordKey(rs[0].Key, id))
	}
	return keys, args
}

// shadowMask returns the take script's argument naming the policies of rs in shadow mode: "" for
// none, else a '1' or '0' per policy.
func shadowMask(rs []admit.Request) string {
	any := false
	for i := range rs {
		any = any || rs[i].Limit.Shadow
	}
	if !any {
		return ""
	}
	mask := make([]byte, len(rs))
	for i := range rs {
		mask[i] = '0'
		if rs[i].Limit.Shadow {
			mask[i] = '1'
		}
	}
	return string(mask)
}

// policyArgs appends the take script's arguments of r's policy: its algorithm's name, then the
// arguments that algorithm's module parses (scripts/<algorithm>.lua); token is the lease r acquires,
// or 0.
func policyArgs(args []string, r *admit.Request, token uint64) []string {
	lim := &r.Limit
	args = append(args, lim.Algorithm.String(),
		formatInt(lim.Rate),
		formatInt(lim.Period.Milliseconds()),
		formatInt(r.Cost))
	switch lim.Algorithm {
	case admit.FixedWindow:
		// limit, window, cost, then aligned
		aligned := "0"
		if lim.Aligned {
			aligned = "1"
		}
		args = append(args, aligned)
	case admit.GCRA:
		// rate, window, cost, burst
		args = append(args, formatInt(lim.Capacity()))
	case admit.SlidingWindow:
		// limit, window, cost
	case admit.SlidingLog:
		// limit, window, cost
	case admit.Concurrency:
		// limit, lease TTL, cost, then the lease's token ('0' for a peek); a token is random, not
		// worth caching
		args = append(args, strconv.FormatUint(token, 10))
	}
	return args
}

// A numString is a number and its decimal form.
type numString struct {
	n int64
	s string
}

// numStrings caches the decimal forms of the numbers policies pass to the scripts (rates, periods,
// costs, bursts), which repeat from call to call: one slot per hash of the number, the last number
// formatted wins it. A miss only formats the number afresh.
var numStrings [1024]atomic.Pointer[numString]

// formatInt returns n in decimal, like strconv.FormatInt(n, 10), without allocating for a number
// formatted recently.
func formatInt(n int64) string {
	if n >= 0 && n < 100 {
		return strconv.FormatInt(n, 10) // a constant string: strconv allocates nothing for these
	}
	slot := &numStrings[uint64(n)*0x9e3779b97f4a7c15>>(64-10)]
	if e := slot.Load(); e != nil && e.n == n {
		return e.s
	}
	s := strconv.FormatInt(n, 10)
	slot.Store(&numString{n: n, s: s})
	return s
}

// gcraConstants returns the Lua that defines the bounds of the GCRA module, rendered from the Go
// constants:
//
//	MAX_TAT            the largest theoretical arrival time, in µs: algo.MaxTAT
//	MAX_TOLERANCE      the largest burst × emission interval, in µs: admit.MaxTolerance
//	INTERVAL_ROUNDING  rounding the interval up may slow the rate by less than 1 in this: admit.MaxIntervalRounding
func gcraConstants() string {
	return fmt.Sprintf("local MAX_TAT = %d\nlocal MAX_TOLERANCE = %d\nlocal INTERVAL_ROUNDING = %d\n",
		algo.MaxTAT, admit.MaxTolerance.Microseconds(), admit.MaxIntervalRounding)
}

// errBadReply means a script answered with something it never sends.
var errBadReply = errors.New("malformed script reply")

// parseTake reads the take script's reply {allowed, replayed, then per policy: allowed, remaining,
// retry_after_ms, reset_after_ms, token} into ds, checking every element's type and range: a token is
// 0 unless its policy admitted a cost above 0 afresh. When all are admitted, the Token of a Decision
// whose Request passed a lease token in tokens (a concurrency policy's) is that token (for a replay,
// the same: a request with an ID derives its tokens from it).
func parseTake(msg rueidis.RedisMessage, rs []admit.Request, ds []admit.Decision, tokens []uint64) (bool, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 2+perPolicy*len(rs) {
		return false, unavailable(fmt.Errorf("%w: want an array of %d integers", errBadReply, 2+perPolicy*len(rs)))
	}
	var v [2 + perPolicy*admit.MaxRequests]int64
	for i := range arr {
		if v[i], err = arr[i].AsInt64(); err != nil {
			return false, unavailable(fmt.Errorf("%w: element %d: %v", errBadReply, i, err))
		}
	}
	allowed, replayed := v[0], v[1]
	if allowed != 0 && allowed != 1 || replayed != 0 && replayed != 1 || replayed == 1 && allowed == 0 {
		return false, unavailable(fmt.Errorf("%w: allowed %d, replayed %d", errBadReply, allowed, replayed))
	}
	all := true
	for i := range rs {
		at := 2 + perPolicy*i
		d, err := decision(v[at:at+4], rs[i].Limit)
		if err != nil {
			return false, err
		}
		token := v[at+4]
		if token < 0 || token > 0 && (!d.Allowed || replayed == 1 || rs[i].Cost == 0) {
			return false, unavailable(fmt.Errorf("%w: policy %d: token %d of a decision that holds nothing", errBadReply, i, token))
		}
		d.Replayed, d.Token = replayed == 1, uint64(token)
		ds[i] = d
		all = all && (d.Allowed || rs[i].Limit.Shadow) // a shadow rejection rejects nothing
	}
	if all != (allowed == 1) {
		return false, unavailable(fmt.Errorf("%w: overall allowed %d disagrees with the policies'", errBadReply, allowed))
	}
	for i := range ds {
		if all && ds[i].Allowed && tokens[i] != 0 { // a rejection acquires nothing, not even under a policy that would have admitted
			ds[i].Token = tokens[i]
		}
	}
	return all, nil
}

// perPolicy is the number of integers the take script replies per policy.
const perPolicy = 5

// parseSettle reads the settle script's reply {allowed, remaining, retry_after_ms, reset_after_ms}
// under lim, checking every element's type and range.
func parseSettle(msg rueidis.RedisMessage, lim admit.Limit) (admit.Decision, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 4 {
		return admit.Decision{}, unavailable(fmt.Errorf("%w: want an array of 4 integers", errBadReply))
	}
	var v [4]int64
	for i := range arr {
		if v[i], err = arr[i].AsInt64(); err != nil {
			return admit.Decision{}, unavailable(fmt.Errorf("%w: element %d: %v", errBadReply, i, err))
		}
	}
	return decision(v[:], lim)
}

// decision reads one policy's {allowed, remaining, retry_after_ms, reset_after_ms}.
func decision(v []int64, lim admit.Limit) (admit.Decision, error) {
	allowed, remaining, retryMS, resetMS := v[0], v[1], v[2], v[3]
	maxMS := lim.MaxWait().Milliseconds()
	if allowed != 0 && allowed != 1 || remaining < 0 || remaining > lim.Capacity() ||
		retryMS < 0 || retryMS > maxMS || resetMS < 0 || resetMS > maxMS {
		// A copy, not v: passing v to fmt would move the caller's array to the heap on every call.
		return admit.Decision{}, unavailable(fmt.Errorf("%w: %v out of range", errBadReply, [4]int64{allowed, remaining, retryMS, resetMS}))
	}
	return admit.Decision{
		Allowed:    allowed == 1,
		Limit:      lim,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryMS) * time.Millisecond,
		ResetAfter: time.Duration(resetMS) * time.Millisecond,
	}, nil
}

// ACLRules returns the ACL SETUSER rules of a least-privilege user of this store: keys under rl:*,
// no channels, and no command but EVALSHA, SCRIPT LOAD, MULTI and EXEC (the transaction of the
// NOSCRIPT fallback, see run), PING and the data commands the scripts call, derived from the
// scripts themselves; never EVAL. A cluster's user needs clusterACLRules besides. docs/redis.md
// gives the same line; a test keeps them equal.
//
// MULTI and EXEC are in the line on every topology, not only a cluster's, where the fallback is
// needed after a failover: the fallback is one code path, reached on a standalone or Sentinel
// server too when its scripts go between the SCRIPT LOAD and the EVALSHA (a SCRIPT FLUSH, a
// failover), one line serves every deployment, and they grant nothing: Redis checks every queued
// command against the user's rules.
func ACLRules() string {
	rules := []string{"resetkeys", "~rl:*", "resetchannels", "-@all", "+evalsha", "+script|load", "+multi", "+exec", "+ping"}
	for _, c := range scriptCommands() {
		rules = append(rules, "+"+strings.ToLower(c))
	}
	return strings.Join(rules, " ")
}

// scriptCalls matches every call a script makes to Redis, and the command it names.
var scriptCalls = regexp.MustCompile(`redis\.p?call\(\s*('([A-Za-z|]+)')?`)

// scriptCommands returns the Redis commands the scripts call, sorted, each once.
func scriptCommands() []string {
	seen := map[string]bool{}
	for _, src := range append(append([]string{preludeSrc}, entryPoints...), modules...) {
		for _, m := range scriptCalls.FindAllStringSubmatch(src, -1) {
			seen[strings.ToUpper(m[2])] = true
		}
	}
	cmds := make([]string, 0, len(seen))
	for c := range seen {
		cmds = append(cmds, c)
	}
	slices.Sort(cmds)
	return cmds
}

// Script returns the Lua source of the entry point name, as redisstore loads it — the rendered
// constants, the prelude, every algorithm module and the entry point — and reports whether there is
// such an entry point: "take", "release" or "settle". It is for benchmarks and tools that call the script as
// redisstore does.
func Script(name string) (src string, ok bool) {
	switch name {
	case takeScript.name:
		return takeScript.src, true
	case releaseScript.name:
		return releaseScript.src, true
	case settleScript.name:
		return settleScript.src, true
	}
	return "", false
}

// settleArgs returns the KEYS and ARGV of the settle script for res at actual: the key; the
// algorithm's name and arguments, as take passes them, with the cost reserved; the token; the actual
// cost. A token above algo.MaxTAT, which the take script never reports, is passed as 0, which names
// no window: the reservation then has nothing to refund, and an overrun still consumes.
func settleArgs(res *admit.Reservation, actual int64) (keys, args []string) {
	token := res.Token
	if token > algo.MaxTAT {
		token = 0
	}
	args = policyArgs(make([]string, 0, 7), &res.Request, 0) // a lease is never settled
	args = append(args, strconv.FormatUint(token, 10), formatInt(actual))
	return []string{res.Request.Key}, args
}
