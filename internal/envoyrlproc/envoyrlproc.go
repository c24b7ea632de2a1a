// Package envoyrlproc builds and configures envoyproxy/ratelimit's service as a process, for the
// live oracle (compat/envoyrl) and the service benchmark (bench/): one place for its build and its
// settings, so that both run the same program the same way.
//
// The service is built in a module of its own (compat/envoyrl/refsvc), where its go.mod pins
// envoyproxy/ratelimit and its dependencies at the versions it asks for: admit's newer
// OpenTelemetry would break its build inside a shared module.
package envoyrlproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Package is the main package of envoyproxy/ratelimit's service, a tool of the module it is built
// in.
const Package = "github.com/envoyproxy/ratelimit/src/service_cmd"

// ModuleDir is the directory of the module the service is built in, from the repository's root.
const ModuleDir = "compat/envoyrl/refsvc"

// Build builds the service into the file out, in the module of directory moduleDir (ModuleDir
// below the repository's root). The error carries go build's output.
func Build(moduleDir, out string) error {
	cmd := exec.Command("go", "build", "-o", out, Package)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return &BuildError{Err: err, Output: b}
	}
	return nil
}

// A BuildError is a failed build of the service, with go build's output.
type BuildError struct {
	Err    error
	Output []byte
}

// Error returns the error and go build's output.
func (e *BuildError) Error() string {
	return "go build " + Package + ": " + e.Err.Error() + "\n" + string(e.Output)
}

// Unwrap returns the error of the build's command.
func (e *BuildError) Unwrap() error { return e.Err }

// Settings are a service's settings: its three listeners, its Redis, and the runtime directory
// its configuration files are loaded from.
type Settings struct {
	// HTTPPort, GRPCPort and DebugPort are its loopback listeners' ports.
	HTTPPort, GRPCPort, DebugPort int
	// RedisAddr is the HOST:PORT of its redis-server (single, TCP, no password).
	RedisAddr string
	// RuntimeRoot holds the configuration files, in RuntimeDir(RuntimeRoot).
	RuntimeRoot string
	// LogLevel is its log's level; "" means warn, which logs no decision.
	LogLevel string
}

// RuntimeDir returns the directory below root the service loads its configuration files from.
func RuntimeDir(root string) string { return filepath.Join(root, "ratelimit", "config") }

// Command returns the command that runs the service bin with s. Its environment is only its
// settings and PATH: none of the caller's variables reaches it. The settings are those admit is
// compared under: Redis with no local cache, no statsd, no per-request logging, no file watching.
func Command(bin string, s Settings) *exec.Cmd {
	level := s.LogLevel
	if level == "" {
		level = "warn"
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"),
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(s.HTTPPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(s.GRPCPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(s.DebugPort),
		"USE_STATSD=false", "LOG_LEVEL=" + level, "LOCAL_CACHE_SIZE_IN_BYTES=0",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + s.RedisAddr, "REDIS_TYPE=SINGLE",
		"RUNTIME_ROOT=" + s.RuntimeRoot, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
	}
	return cmd
}
