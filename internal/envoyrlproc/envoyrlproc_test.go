package envoyrlproc

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCommandEnvironment(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://elsewhere:1")
	cmd := Command("/bin/ratelimit", Settings{HTTPPort: 1, GRPCPort: 2, DebugPort: 3, RedisAddr: "127.0.0.1:9", RuntimeRoot: "/r"})
	for _, want := range []string{"PORT=1", "GRPC_PORT=2", "DEBUG_PORT=3", "REDIS_URL=127.0.0.1:9", "RUNTIME_ROOT=/r",
		"LOG_LEVEL=warn", "USE_STATSD=false", "LOCAL_CACHE_SIZE_IN_BYTES=0"} {
		if !slices.Contains(cmd.Env, want) {
			t.Errorf("env %q: no %s", cmd.Env, want)
		}
	}
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "REDIS_URL=redis://") {
			t.Errorf("the caller's REDIS_URL reached the service: %s", kv)
		}
	}
	cmd = Command("/bin/ratelimit", Settings{LogLevel: "debug"})
	if !slices.Contains(cmd.Env, "LOG_LEVEL=debug") {
		t.Errorf("env %q: no LOG_LEVEL=debug", cmd.Env)
	}
}

func TestBuildErrorCarriesOutput(t *testing.T) {
	err := Build(t.TempDir(), filepath.Join(t.TempDir(), "ratelimit")) // no module there
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("Build in an empty directory: %v, want a *BuildError", err)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || len(be.Output) == 0 || !strings.Contains(err.Error(), string(be.Output)) {
		t.Errorf("Build's error %q: want go build's exit and its output", err)
	}
}
