package redisstore

import (
	"regexp"
	"slices"
	"strings"
)

// ACLRules returns the ACL SETUSER rules of a least-privilege user of this store: keys under rl:*,
// no channels, and no command but EVALSHA, SCRIPT LOAD, MULTI and EXEC (the transaction of the
// NOSCRIPT fallback, see run), PING, WAIT (replicated policies, durable.go) and the data commands the scripts call, derived from the
// scripts themselves (scriptSources, the RLQS demand script among them), with those the Override methods send (overrideCommands: an override key
// rl:<policy>:o:{…} and a policy's index rl:<policy>:o:index are under rl:*); never EVAL. A cluster's user needs clusterACLRules besides. docs/redis.md
// gives the same line; a test keeps them equal.
//
// MULTI and EXEC are in the line on every topology, not only a cluster's, where the fallback is
// needed after a failover: the fallback is one code path, reached on a standalone or Sentinel
// server too when its scripts go between the SCRIPT LOAD and the EVALSHA (a SCRIPT FLUSH, a
// failover), one line serves every deployment, and they grant nothing: Redis checks every queued
// command against the user's rules.
func ACLRules() string {
	rules := []string{"resetkeys", "~rl:*", "resetchannels", "-@all", "+evalsha", "+script|load", "+multi", "+exec", "+ping", "+wait"}
	for _, c := range scriptCommands() {
		rules = append(rules, "+"+strings.ToLower(c))
	}
	return strings.Join(rules, " ")
}

// scriptCalls matches every call a script makes to Redis, and the command it names.
var scriptCalls = regexp.MustCompile(`redis\.p?call\(\s*('([A-Za-z|]+)')?`)

// overrideCommands are the commands SetOverride, Override, DeleteOverride, Overrides and
// OverrideCount send, besides PUBLISH (ResetACLRules).
var overrideCommands = []string{"DEL", "GET", "SET", "ZADD", "ZCARD", "ZRANGE", "ZREM"}

// scriptSources are the sources of every script the Store runs: the prelude, the entry points,
// the algorithm modules and the RLQS demand script (demand.go), which ACLRules is derived from.
func scriptSources() []string {
	return slices.Concat([]string{integerSrc, preludeSrc, demandSrc}, entryPoints, modules)
}

// scriptCommands returns the Redis commands the scripts call and overrideCommands, sorted, each once.
func scriptCommands() []string {
	seen := map[string]bool{}
	for _, c := range overrideCommands {
		seen[c] = true
	}
	for _, src := range scriptSources() {
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
