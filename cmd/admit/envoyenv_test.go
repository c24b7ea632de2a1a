package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
)

func TestEnvoyRedisURL(t *testing.T) {
	for _, c := range []struct {
		socket, typ, addr, auth string
		tls                     bool
		want                    string
	}{
		{"tcp", "SINGLE", "redis:6379", "", false, "redis://redis:6379"},
		{"TCP", "single", "redis:6379", "s3cret", true, "rediss://:s3cret@redis:6379"},
		{"tcp", "SINGLE", "redis:6379", "admit:p@ss:word", false, "redis://admit:p%40ss%3Aword@redis:6379"},
		{"unix", "SINGLE", "/var/run/nutcracker/ratelimit.sock", "", false, "unix:///var/run/nutcracker/ratelimit.sock"},
		{"tcp", "CLUSTER", "h1:7000, h2:7001,h3:7002", "", false, "redis://h1:7000?addr=h2%3A7001&addr=h3%3A7002"},
		{"tcp", "cluster", "h1:7000", "", false, "redis://h1:7000"},
		{"tcp", "SENTINEL", "mymaster,s1:26379,s2:26379", "pw", false, "redis://:pw@s1:26379?addr=s2%3A26379&master_set=mymaster"},
	} {
		got, err := envoyRedisURL(c.socket, c.typ, c.addr, c.auth, c.tls)
		if err != nil || got != c.want {
			t.Errorf("envoyRedisURL(%q, %q, %q, auth, %v) = %q, %v; want %q", c.socket, c.typ, c.addr, c.tls, got, err, c.want)
		}
		if err := checkRedisURL("REDIS_URL", got); err != nil {
			t.Errorf("%q: redisstore refuses it: %v", got, err)
		}
	}
	for _, c := range []struct{ socket, typ, addr, want string }{
		{"tcp", "SINGLE", "h1:1,h2:2", "SINGLE wants one address"},
		{"tcp", "SENTINEL", "mymaster", "SENTINEL wants master_name"},
		{"tcp", "REPLICATED", "h1:1", `REDIS_TYPE "REPLICATED"`},
		{"udp", "SINGLE", "h1:1", `REDIS_SOCKET_TYPE "udp"`},
		{"unix", "CLUSTER", "/a,/b", "REDIS_SOCKET_TYPE unix"},
		{"tcp", "SINGLE", "redis://:s3cret-pw@h1:1", "give a URL with --redis"},
	} {
		if _, err := envoyRedisURL(c.socket, c.typ, c.addr, "s3cret-pw", false); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("envoyRedisURL(%q, %q, %q): %v; want an error with %q, without the password", c.socket, c.typ, c.addr, err, c.want)
		}
	}
}

// TestEnvoyEnvDefaults checks what --envoy-env makes of an empty environment: envoyproxy/ratelimit's
// defaults, not admit's.
func TestEnvoyEnvDefaults(t *testing.T) {
	e, err := readEnvoyEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := envoyEnv{listen: "0.0.0.0:8080", grpcListen: "0.0.0.0:8081", envoyConfig: "/srv/runtime_data/current/config",
		redisURL: "unix:///var/run/nutcracker/ratelimit.sock", logFormat: "text", nearLimitRatio: 0.8}
	if e.listen != want.listen || e.grpcListen != want.grpcListen || e.envoyConfig != want.envoyConfig || e.redisURL != want.redisURL ||
		e.logFormat != want.logFormat || e.nearLimitRatio != want.nearLimitRatio || e.localCacheSize != 0 || e.shadowMode ||
		e.responseHeaders || e.grpcTLS.Enabled() || len(e.ignored) != 0 {
		t.Errorf("readEnvoyEnv(nil) = %+v; want %+v", e, want)
	}
}

func TestEnvoyEnvValues(t *testing.T) {
	e, err := readEnvoyEnv([]string{"HOST=127.0.0.1", "PORT=9080", "GRPC_HOST=::1", "GRPC_PORT=9081", "RUNTIME_ROOT=/data",
		"RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=conf", "SHADOW_MODE=true", "LIMIT_RESPONSE_HEADERS_ENABLED=1",
		"NEAR_LIMIT_RATIO=0.9", "LOCAL_CACHE_SIZE_IN_BYTES=1048576", "LOG_FORMAT=json", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=r:6379",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/c.pem", "GRPC_SERVER_TLS_KEY=/k.pem", "GRPC_CLIENT_TLS_CACERT=/ca.pem",
		"REDIS_TLS_CACERT=/rca.pem", "CONFIG_TYPE=file", "BACKEND_TYPE=REDIS",
		"TRACING_ENABLED=true", "CONFIG_GRPC_XDS_NODE_ID=x", "REDIS_PERSECOND=true", "GRPC_UDS=", "PATH=/bin",
		"QUOTA_MODE=true", "REDIS_TIMEOUT=750ms", "REDIS_POOL_ON_EMPTY_BEHAVIOR=WAIT", "REDIS_SENTINEL_AUTH=not-for-single"})
	if err != nil {
		t.Fatal(err)
	}
	if e.listen != "127.0.0.1:9080" || e.grpcListen != "[::1]:9081" || e.envoyConfig != "/data/ratelimit/conf" || !e.shadowMode ||
		!e.responseHeaders || e.nearLimitRatio != 0.9 || e.localCacheSize != 1<<20 || e.logFormat != "json" || e.redisURL != "redis://r:6379" ||
		e.grpcTLS != (policy.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem", ClientCAFile: "/ca.pem"}) || e.redisTLS.CAFile != "/rca.pem" ||
		!e.quotaMode || e.commandTimeout != 750*time.Millisecond || e.sentinelPassword != "" {
		t.Errorf("readEnvoyEnv = %+v", e)
	}
	// Those set and not honoured, families included, and REDIS_SENTINEL_AUTH without REDIS_TYPE
	// SENTINEL; an empty one is not set.
	if want := []string{"CONFIG_GRPC_XDS_NODE_ID", "REDIS_PERSECOND", "REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_SENTINEL_AUTH", "TRACING_ENABLED"}; !slices.Equal(e.ignored, want) {
		t.Errorf("ignored %q, want %q", e.ignored, want)
	}
}

func TestEnvoyEnvBadValues(t *testing.T) {
	for _, c := range []struct{ kv, want string }{
		{"PORT=http", `PORT "http": want a port`},
		{"GRPC_PORT=70000", `GRPC_PORT "70000"`},
		{"SHADOW_MODE=yes", `SHADOW_MODE "yes": want true or false`},
		{"REDIS_TLS=on", `REDIS_TLS "on"`},
		{"NEAR_LIMIT_RATIO=1.5", `NEAR_LIMIT_RATIO "1.5"`},
		{"NEAR_LIMIT_RATIO=0", `NEAR_LIMIT_RATIO "0"`},
		{"LOCAL_CACHE_SIZE_IN_BYTES=-1", `LOCAL_CACHE_SIZE_IN_BYTES "-1"`},
		{"LOCAL_CACHE_SIZE_IN_BYTES=1MB", `LOCAL_CACHE_SIZE_IN_BYTES "1MB"`},
		{"LOG_FORMAT=logfmt", `LOG_FORMAT "logfmt"`},
		{"CONFIG_TYPE=GRPC_XDS_SOTW", `CONFIG_TYPE "GRPC_XDS_SOTW": admit reads FILE only`},
		{"BACKEND_TYPE=memcache", `BACKEND_TYPE "memcache"`},
		{"REDIS_SOCKET_TYPE=udp", `REDIS_SOCKET_TYPE "udp"`},
		{"GRPC_SERVER_USE_TLS=true", "wants GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
		{"RUNTIME_WATCH_ROOT=maybe", `RUNTIME_WATCH_ROOT "maybe"`},
		{"QUOTA_MODE=yes", `QUOTA_MODE "yes": want true or false`},
		{"REDIS_TIMEOUT=10", `REDIS_TIMEOUT "10": want a duration from 10ms to 1m`},
		{"REDIS_TIMEOUT=5ms", `REDIS_TIMEOUT "5ms"`},
		{"REDIS_TIMEOUT=2m", `REDIS_TIMEOUT "2m"`},
		{"REDIS_TIMEOUT=-1s", `REDIS_TIMEOUT "-1s"`},
	} {
		if _, err := readEnvoyEnv([]string{c.kv}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.kv, err, c.want)
		}
	}
}

// TestEnvoyEnvFlagsWin runs parseServe with --envoy-env: a flag given wins over the variable, and
// the variable over admit's default.
func TestEnvoyEnvFlagsWin(t *testing.T) {
	t.Setenv("REDIS_URL", "redis.internal:6379") // envoyproxy/ratelimit's form, not admit's URL
	t.Setenv("REDIS_SOCKET_TYPE", "tcp")
	t.Setenv("GRPC_PORT", "9081")
	t.Setenv("PORT", "9080")
	t.Setenv("NEAR_LIMIT_RATIO", "0.5")
	t.Setenv("SHADOW_MODE", "true")
	t.Setenv("QUOTA_MODE", "true")
	t.Setenv("LOCAL_CACHE_SIZE_IN_BYTES", "2560")
	t.Setenv(listenEnv, "")
	cfg, code, done := parseServe([]string{"--envoy-env", "--grpc-listen", "127.0.0.1:7081", "--shadow-mode=false"}, io.Discard, io.Discard)
	if done {
		t.Fatalf("parseServe: exit %d", code)
	}
	if cfg.grpcListen != "127.0.0.1:7081" || cfg.listen != "0.0.0.0:9080" || cfg.redisURL != "redis://redis.internal:6379" ||
		cfg.ops.nearLimitRatio != 0.5 || cfg.ops.shadowMode || cfg.envoyConfig != "/srv/runtime_data/current/config" ||
		!cfg.ops.quotaMode || !cfg.ops.rlsOps(nil).QuotaMode {
		t.Errorf("parseServe = listen %q, grpc %q, redis %q, ratio %v, shadow %v, quota %v, dir %q", cfg.listen, cfg.grpcListen, cfg.redisURL,
			cfg.ops.nearLimitRatio, cfg.ops.shadowMode, cfg.ops.quotaMode, cfg.envoyConfig)
	}
	if entries, age := cfg.ops.overLimitCache(0); entries != 10 || age != policy.DefaultLocalCacheMaxAge {
		t.Errorf("2560 bytes: %d entries for %v; want 10 for %v", entries, age, policy.DefaultLocalCacheMaxAge)
	}
	// Without --envoy-env, REDIS_URL is admit's, a URL: envoyproxy/ratelimit's form is refused.
	if _, code, done := parseServe(nil, io.Discard, io.Discard); !done || code != exitUsage {
		t.Errorf("REDIS_URL host:port without --envoy-env: exit %d, %v; want %d", code, done, exitUsage)
	}
	t.Setenv("NEAR_LIMIT_RATIO", "2")
	var stderr strings.Builder
	if _, code, done := parseServe([]string{"--envoy-env"}, io.Discard, &stderr); !done || code != exitUsage || !strings.Contains(stderr.String(), "NEAR_LIMIT_RATIO") {
		t.Errorf("NEAR_LIMIT_RATIO=2: exit %d, %q; want %d naming it", code, stderr.String(), exitUsage)
	}
}

// TestEnvoyEnvRedisSettings: REDIS_SENTINEL_AUTH reaches the sentinels of REDIS_TYPE SENTINEL
// (REDIS_AUTH the data servers), as password or user:password; REDIS_TIMEOUT is the command
// timeout over the file's, which stands when it is unset.
func TestEnvoyEnvRedisSettings(t *testing.T) {
	t.Setenv(listenEnv, "")
	t.Setenv("REDIS_SOCKET_TYPE", "tcp")
	t.Setenv("REDIS_TYPE", "sentinel")
	t.Setenv("REDIS_URL", "mymaster,s1:26379,s2:26379")
	t.Setenv("REDIS_AUTH", "data-pw")
	for _, tc := range []struct{ auth, user, pass string }{{"sentinel-pw", "", "sentinel-pw"}, {"watcher:s:pw", "watcher", "s:pw"}} {
		t.Setenv("REDIS_SENTINEL_AUTH", tc.auth)
		t.Setenv("REDIS_TIMEOUT", "750ms")
		cfg, code, done := parseServe([]string{"--envoy-env"}, io.Discard, io.Discard)
		if done {
			t.Fatalf("parseServe: exit %d", code)
		}
		cfg.applyFile(policy.Server{RedisCommandTimeout: policy.DefaultRedisCommandTimeout})
		got := redisConfig(cfg)
		if got.SentinelUser != tc.user || got.SentinelPassword != tc.pass || got.CommandTimeout != 750*time.Millisecond ||
			got.URL != "redis://:data-pw@s1:26379?addr=s2%3A26379&master_set=mymaster" {
			t.Errorf("REDIS_SENTINEL_AUTH=%s: sentinels %q/%q, timeout %v, URL %s", tc.auth, got.SentinelUser, got.SentinelPassword, got.CommandTimeout, got.URL)
		}
		if _, err := redisstore.New(got); err != nil { // redisstore takes them: a master_set URL
			t.Errorf("redisstore.New: %v", err)
		}
	}
	// --redis given: the URL is the flag's, and so are its credentials.
	cfg, code, done := parseServe([]string{"--envoy-env", "--redis", "redis://127.0.0.1:6379"}, io.Discard, io.Discard)
	if done {
		t.Fatalf("parseServe --redis: exit %d", code)
	}
	if got := redisConfig(cfg); got.SentinelPassword != "" || got.URL != "redis://127.0.0.1:6379" {
		t.Errorf("--redis: sentinel password %q, URL %s; want the flag's alone", got.SentinelPassword, got.URL)
	}
	t.Setenv("REDIS_TIMEOUT", "")
	cfg, code, done = parseServe([]string{"--envoy-env"}, io.Discard, io.Discard)
	if done {
		t.Fatalf("parseServe: exit %d", code)
	}
	cfg.applyFile(policy.Server{RedisCommandTimeout: 300 * time.Millisecond})
	if got := redisConfig(cfg).CommandTimeout; got != 300*time.Millisecond {
		t.Errorf("REDIS_TIMEOUT unset: command timeout %v, want the file's 300ms", got)
	}
}

func TestOpsFlagsChecked(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	for _, args := range [][]string{{"--near-limit-ratio", "0"}, {"--near-limit-ratio", "1.01"}, {"--local-cache-size", "-2"}} {
		var stderr strings.Builder
		if _, code, done := parseServe(args, io.Discard, &stderr); !done || code != exitUsage || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%q: exit %d, %q; want %d naming the flag", args, code, stderr.String(), exitUsage)
		}
	}
	for _, c := range []struct {
		size    int64
		maxAge  time.Duration
		entries int
		age     time.Duration
	}{
		{-1, time.Second, 0, time.Second}, // not given: server.local_cache_max_age decides
		{-1, 0, 0, 0},
		{0, time.Second, 0, 0}, // 0: no cache
		{100, 2 * time.Second, 1, 2 * time.Second},
		{1 << 20, 0, 4096, policy.DefaultLocalCacheMaxAge},
	} {
		if n, age := (opsConfig{localCacheSize: c.size}).overLimitCache(c.maxAge); n != c.entries || age != c.age {
			t.Errorf("--local-cache-size %d, max age %v: %d entries, %v; want %d, %v", c.size, c.maxAge, n, age, c.entries, c.age)
		}
	}
}

// envoyEnvTable renders envoyVars as docs/envoy.md's table of variables.
func envoyEnvTable() string {
	var b strings.Builder
	b.WriteString("| variable | envoyproxy/ratelimit's default | meaning there | honoured | admit |\n|---|---|---|---|---|\n")
	for _, v := range envoyVars {
		def := ""
		if v.def != "" {
			def = "`" + v.def + "`"
		}
		honoured := "no"
		if v.honoured {
			honoured = "yes"
		}
		b.WriteString("| `" + v.name + "` | " + def + " | " + v.meaning + " | " + honoured + " | " + v.admit + " |\n")
	}
	return b.String()
}

// Markers of the generated table in docs/envoy.md.
const (
	envoyTableBegin = "<!-- envoy-env table: generated from cmd/admit's envoyVars; TestEnvoyEnvDocumented checks it -->\n"
	envoyTableEnd   = "<!-- end of the envoy-env table -->\n"
)

// TestEnvoyEnvDocumented checks that docs/envoy.md's table of variables is envoyVars;
// ADMIT_UPDATE_DOCS=1 rewrites it.
func TestEnvoyEnvDocumented(t *testing.T) {
	const path = "../../docs/envoy.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	before, rest, ok := strings.Cut(doc, envoyTableBegin)
	table, after, ok2 := strings.Cut(rest, envoyTableEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no table between %q and %q", path, envoyTableBegin, envoyTableEnd)
	}
	want := envoyEnvTable()
	if table == want {
		return
	}
	if os.Getenv("ADMIT_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(before+envoyTableBegin+want+envoyTableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the table of %s", path)
		return
	}
	t.Errorf("%s: the table of variables differs from envoyVars (ADMIT_UPDATE_DOCS=1 go test -run TestEnvoyEnvDocumented ./cmd/admit rewrites it); want:\n%s", path, want)
}

// TestEnvoyVarsWellFormed checks the list itself: names unique and upper case, every one explained.
func TestEnvoyVarsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range envoyVars {
		if seen[v.name] || v.name != strings.ToUpper(v.name) || v.meaning == "" || v.admit == "" || strings.Contains(v.meaning+v.admit, "|") {
			t.Errorf("envoyVars: %+v: want a unique upper-case name, a meaning and what admit makes of it, without |", v)
		}
		seen[v.name] = true
		if !v.honoured && !strings.HasPrefix(v.admit, "not honoured") {
			t.Errorf("%s is not honoured and its text does not say so first: %q", v.name, v.admit)
		}
	}
	for _, name := range []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_WATCH_ROOT", "PORT", "GRPC_PORT", "DEBUG_PORT",
		"REDIS_SOCKET_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_TLS", "REDIS_TYPE", "SHADOW_MODE", "LOCAL_CACHE_SIZE_IN_BYTES",
		"NEAR_LIMIT_RATIO", "LIMIT_RESPONSE_HEADERS_ENABLED", "GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY",
		"GRPC_CLIENT_TLS_CACERT"} {
		if !seen[name] {
			t.Errorf("envoyVars lacks %s", name)
		}
	}
}

func TestGRPCTLSAndServerTLSRefused(t *testing.T) {
	o := opsConfig{grpcTLS: policy.ServerTLS{CertFile: "/c.pem", KeyFile: "/k.pem"}}
	srv := policy.Server{TLS: policy.ServerTLS{CertFile: "/file.pem", KeyFile: "/file.key"}}
	if only, err := o.useGRPCTLS(&srv); err == nil || only {
		t.Errorf("GRPC_SERVER_USE_TLS with server.tls: %v, %v; want an error", only, err)
	}
	srv = policy.Server{}
	if only, err := o.useGRPCTLS(&srv); err != nil || !only || srv.TLS != o.grpcTLS {
		t.Errorf("GRPC_SERVER_USE_TLS alone: %v, %v, %+v; want gRPC's TLS", only, err, srv.TLS)
	}
	if only, err := (opsConfig{}).useGRPCTLS(&srv); err != nil || only {
		t.Errorf("no GRPC_SERVER_USE_TLS: %v, %v", only, err)
	}
}

// The variables of envoyproxy/ratelimit's settings that admit serve has --envoy-* flags for: an
// explicit STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false asks for its counting, unset keeps admit's.
func TestEnvoyEnvSettingsFlags(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		want    envoyFlags
	}{
		{nil, envoyFlags{}},
		{[]string{"MERGE_DOMAIN_CONFIG=true", "RESPONSE_DYNAMIC_METADATA=true"}, envoyFlags{mergeDomains: true, dynamicMetadata: true}},
		{[]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false"}, envoyFlags{incrementOverLimit: true}},
		{[]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"}, envoyFlags{}},
		{[]string{"USE_PROMETHEUS=true"}, envoyFlags{metrics: true}},
		{[]string{"USE_PROMETHEUS=false"}, envoyFlags{}},
	} {
		e, err := readEnvoyEnv(tc.environ)
		if err != nil {
			t.Fatalf("readEnvoyEnv(%q): %v", tc.environ, err)
		}
		if e.envoy != tc.want {
			t.Errorf("readEnvoyEnv(%q): %+v; want %+v", tc.environ, e.envoy, tc.want)
		}
		if len(e.ignored) != 0 {
			t.Errorf("readEnvoyEnv(%q) ignores %q; want them honoured", tc.environ, e.ignored)
		}
	}
	for _, name := range []string{"MERGE_DOMAIN_CONFIG", "USE_PROMETHEUS"} {
		if _, err := readEnvoyEnv([]string{name + "=maybe"}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=maybe: %v; want an error naming it", name, err)
		}
	}
}
