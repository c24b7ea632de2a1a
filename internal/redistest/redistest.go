// Package redistest starts real redis-server processes, and listeners that misbehave, for tests and benchmarks.
//
// A test starts its own redis-server, which is gone when the test ends:
//
//	func TestCounter(t *testing.T) {
//		s := redistest.Start(t, "--maxmemory", "1mb")
//		if n, err := s.Do(t, "INCR", "hits").AsInt64(); err != nil || n != 1 {
//			t.Fatalf("INCR hits = %d, %v; want 1", n, err)
//		}
//		s.Kill(t)    // Redis is gone: the code under test should report it unavailable.
//		s.Restart(t) // Same address, empty data.
//	}
//
// Every data server the harness starts has the least-privilege ACL user [User] with [Password],
// allowed only [ACLRules] and [ResetACLRules] (plus [ClusterACLRules] or [SentinelACLRules] where they apply), and the
// URLs it hands out log in as that user; its own clients ([Server.Do], [Server.Client]) and
// [Server.AdminURL] are the unrestricted default user, to inspect or break a server. Which rules, and why: docs/development.md#tests.
//
// Every function needs the testing.TB of a running test, so the package has no runnable Example;
// its own tests show each use.
package redistest

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

const (
	// binary is the program Start runs, looked up on PATH.
	binary = "redis-server"
	// requireEnv names the environment variable that turns a missing redis-server from a skip into a failure.
	requireEnv = "ADMIT_REQUIRE_REDIS"
	// startAttempts bounds how many free ports Start tries when another process takes the one it chose.
	startAttempts = 5
	// readyTimeout bounds how long a start waits for the server to answer PING: patient, as a loaded
	// machine may take seconds to start one.
	readyTimeout = 30 * time.Second
	// exitTimeout bounds how long Stop waits for a graceful exit, and Kill for the process to be reaped.
	exitTimeout = 10 * time.Second
	// doTimeout bounds one command sent by Do.
	doTimeout = 10 * time.Second
	// logTailLines is how many lines of each log a failure message quotes.
	logTailLines = 30
)

// User and Password are the least-privilege ACL user the harness creates on every data server it starts.
const (
	// User is the name of the least-privilege user.
	User = "admit"
	// Password is User's password.
	Password = "s3cret"
)

// ACLRules is the ACL SETUSER rule list of admit's least-privilege user on a standalone Redis, as
// README.md, docs/redis.md and docs/running-redis.md give it: EVALSHA and SCRIPT LOAD (never EVAL),
// MULTI and EXEC (the transaction redisstore falls back to on a second NOSCRIPT), PING, and the data
// commands the scripts call, on rl:* keys. A redisstore test checks that it is what
// redisstore derives from its scripts and what the docs say; the harness creates [User] with it on
// every server it starts.
const ACLRules = "resetkeys ~rl:* resetchannels -@all +evalsha +script|load +multi +exec +ping +wait +decrby +del +get +hgetall +hincrby +hset +incrby +pexpireat +pexpiretime +pttl +set +time +zadd +zcard +zcount +zrange +zrem +zremrangebyscore"

// ClusterACLRules are the rules a Redis Cluster node's user needs besides [ACLRules]: the client reads
// the cluster's topology with CLUSTER SLOTS (Redis 7) or CLUSTER SHARDS (Redis 8 and later), and
// follows an ASK redirect, while a slot migrates, with ASKING. READONLY is not needed: redisstore
// never reads from replicas.
const ClusterACLRules = "+cluster|slots +cluster|shards +asking"

// ResetACLRules are the rules a user needs besides [ACLRules] to reset keys and hear resets
// (redisstore.ResetACLRules: PUBLISH and SUBSCRIBE on its channel); the harness grants them to
// [User] on every data server.
const ResetACLRules = "&rl:reset +publish +subscribe"

// SentinelACLRules are the rules the user of a server Sentinel watches needs besides [ACLRules]: the
// client asks the server the sentinels name with ROLE whether it really is the primary.
const SentinelACLRules = "+role"

// Available reports whether redis-server is on PATH, that is, whether [Start] would run rather than skip.
func Available() bool {
	_, err := exec.LookPath(binary)
	return err == nil
}

// requireRedis skips t when redis-server is not on PATH, or fails it when the environment variable
// ADMIT_REQUIRE_REDIS is 1.
func requireRedis(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("redis-server not found on PATH and %s=1: install it with: apt-get install redis-server", requireEnv)
	}
	t.Skip("redis-server not found: Redis tests SKIPPED; install it (apt-get install redis-server) or run make test")
}
