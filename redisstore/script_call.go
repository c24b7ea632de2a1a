package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
)

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
	return runOn(ctx, c, sc, keys, args)
}

// A doer sends commands: the Store's pipelined client, or one of its dedicated connections
// (durable.go).
type doer interface {
	B() rueidis.Builder
	Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// runOn is run on c.
func runOn(ctx context.Context, c doer, sc *script, keys, args []string) (rueidis.RedisMessage, error) {
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
func evalshaInTransaction(ctx context.Context, c doer, sc *script, keys, args []string) rueidis.RedisResult {
	return transactionReply(sc, sendTransaction(ctx, c, sc, keys, args))
}

// sendTransaction sends MULTI, SCRIPT LOAD of sc, EVALSHA of sc on keys and args, EXEC with one
// DoMulti and returns the four replies. The client routes the commands by the EVALSHA's slot (the
// others have none). On a cluster a MOVED or ASK of the queued EVALSHA aborts the transaction where
// it was sent, unrun (EXECABORT), and the client sends the whole MULTI … EXEC again to the node
// named (after ASKING, for an ASK): there the script is loaded and run in one atomic step, so it
// cannot meet NOSCRIPT.
func sendTransaction(ctx context.Context, c doer, sc *script, keys, args []string) []rueidis.RedisResult {
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
func loadFor(ctx context.Context, c doer, sc *script, keys []string) error {
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
func loadOn(ctx context.Context, c doer, cmd rueidis.Completed, sc *script) error {
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
