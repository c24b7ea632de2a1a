package envoyrlproc_test

import (
	"fmt"

	"github.com/admit-dev/admit/internal/envoyrlproc"
)

// The command of a service on a redis-server at 127.0.0.1:6379, its files in /tmp/rl's runtime
// directory.
func ExampleCommand() {
	cmd := envoyrlproc.Command("/tmp/ratelimit", envoyrlproc.Settings{
		HTTPPort: 8080, GRPCPort: 8081, DebugPort: 6070,
		RedisAddr: "127.0.0.1:6379", RuntimeRoot: "/tmp/rl",
	})
	fmt.Println(cmd.Path)
	fmt.Println(envoyrlproc.RuntimeDir("/tmp/rl"))
	for _, kv := range cmd.Env[1:4] {
		fmt.Println(kv)
	}
	// Output:
	// /tmp/ratelimit
	// /tmp/rl/ratelimit/config
	// HOST=127.0.0.1
	// PORT=8080
	// GRPC_HOST=127.0.0.1
}
