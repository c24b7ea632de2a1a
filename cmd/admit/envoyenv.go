package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/admit-dev/admit/policy"
)

// An envoyVar is one environment variable of envoyproxy/ratelimit (its settings.go), as admit
// serve --envoy-env reads it: envoyVars is the one list, which docs/envoy.md's table of variables
// is checked against (TestEnvoyEnvDocumented).
type envoyVar struct {
	name     string
	def      string // envoyproxy/ratelimit's default, "" for none
	meaning  string // what it means to envoyproxy/ratelimit
	admit    string // what admit makes of it; for one not honoured, why
	honoured bool
}

// envoyVars are the environment variables of envoyproxy/ratelimit. Those honoured map onto admit
// serve's flags (a flag given wins) and configuration; every other one that is set is named in one
// warning at startup. The values refused (CONFIG_TYPE, BACKEND_TYPE other than admit's) refuse
// to start.
var envoyVars = []envoyVar{
	{"RUNTIME_ROOT", "/srv/runtime_data/current", "the root of the runtime directory", "`--envoy-config` is `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`", true},
	{"RUNTIME_SUBDIRECTORY", "", "the runtime's subdirectory of `RUNTIME_ROOT`", "part of `--envoy-config`", true},
	{"RUNTIME_APPDIRECTORY", "config", "the directory of the YAML files in the subdirectory", "part of `--envoy-config`", true},
	{"RUNTIME_WATCH_ROOT", "true", "watch the root (a symlink swap) rather than the subdirectory (edits in place)", "either value: admit rereads the directory's files every second and reloads when they change (a ConfigMap's symlink swap too), and on SIGHUP", true},
	{"RUNTIME_IGNOREDOTFILES", "false", "skip files whose names start with a dot", "always: files starting with `.` are skipped, as are names not ending in `.yaml` or `.yml`", true},
	{"CONFIG_TYPE", "FILE", "`FILE`, or `GRPC_XDS_SOTW` for xDS", "`FILE` only: any other value refuses to start (exit 2)", true},
	{"CONFIG_GRPC_XDS_*", "", "the xDS configuration source", "not honoured: no xDS", false},
	{"XDS_CLIENT_*", "", "the xDS client's backoff", "not honoured: no xDS", false},
	{"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "start without a configuration", "not honoured: admit refuses to start on a missing or invalid directory; a bad reload keeps the last good one", false},
	{"MERGE_DOMAIN_CONFIG", "false", "merge the files of one domain", "`--envoy-merge-domains`; without it two files of one domain are an error", true},
	{"RESPONSE_DYNAMIC_METADATA", "false", "put the request's descriptors (entries, hits_addend, limit override) and quota mode's violations in the response's dynamic metadata", "`--envoy-dynamic-metadata`", true},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "unhealthy until a configuration loads", "always: admit never serves without a configuration", true},
	{"HOST", "0.0.0.0", "the HTTP listener's host", "the host of `--listen`", true},
	{"PORT", "8080", "the HTTP listener's port: `/healthcheck`, `/json`", "the port of `--listen`, which serves `/healthcheck`, `/json`, `/metrics` and admit's own paths", true},
	{"GRPC_HOST", "0.0.0.0", "the gRPC listener's host", "the host of `--grpc-listen`", true},
	{"GRPC_PORT", "8081", "the gRPC listener's port", "the port of `--grpc-listen`", true},
	{"GRPC_UDS", "", "a Unix socket for gRPC instead of `GRPC_HOST:GRPC_PORT`", "not honoured: admit listens for gRPC on TCP", false},
	{"DEBUG_HOST", "0.0.0.0", "the debug listener's host", "not honoured: no debug listener; `/metrics` is on `PORT`, the configuration's hash is logged at each load", false},
	{"DEBUG_PORT", "6070", "the debug listener's port: pprof, `/rlconfig`, `/stats`", "not honoured, as `DEBUG_HOST`", false},
	{"GRPC_MAX_CONNECTION_AGE", "24h", "the longest life of a gRPC connection", "not honoured: idle connections close after 5 minutes", false},
	{"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "the grace after `GRPC_MAX_CONNECTION_AGE`", "not honoured", false},
	{"GRPC_SERVER_USE_TLS", "false", "serve gRPC over TLS", "gRPC, and only gRPC, over TLS, its files reloaded as `server.tls`'s are; refused with the file's `server.tls`", true},
	{"GRPC_SERVER_TLS_CERT", "", "the gRPC server's certificate chain", "as `server.tls.cert_file`, for gRPC", true},
	{"GRPC_SERVER_TLS_KEY", "", "the gRPC server's key", "as `server.tls.key_file`, for gRPC", true},
	{"GRPC_CLIENT_TLS_CACERT", "", "the CAs of client certificates: mutual TLS", "as `server.tls.client_ca_file`, for gRPC", true},
	{"GRPC_CLIENT_TLS_SAN", "", "the SAN a client certificate must have", "not honoured: any certificate of the CAs is accepted", false},
	{"LOG_LEVEL", "WARN", "the least level logged", "not honoured: admit logs loads, reloads and errors, and undecided requests at a bounded rate", false},
	{"LOG_FORMAT", "text", "`text` or `json`", "`--log-format`", true},
	{"BACKEND_TYPE", "redis", "`redis` or `memcache`", "`redis` only: any other value refuses to start (exit 2)", true},
	{"REDIS_SOCKET_TYPE", "unix", "`tcp` or `unix`", "the scheme of `--redis`: `redis://` (`rediss://` with `REDIS_TLS`) or `unix://`", true},
	{"REDIS_TYPE", "SINGLE", "`SINGLE`, `SENTINEL` or `CLUSTER`, in any case", "the form of `--redis`: `SENTINEL`'s `master,s1:p,s2:p` becomes `redis://s1:p?addr=s2:p&master_set=master`, `CLUSTER`'s `h1:p,h2:p` becomes `redis://h1:p?addr=h2:p`", true},
	{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock", "Redis's `host:port`, socket path, or list", "`--redis`, made a URL as above (under `--envoy-env` admit's own `REDIS_URL`, a URL, is not read)", true},
	{"REDIS_AUTH", "", "Redis's password, or `user:password`", "the user and password of `--redis` (never logged)", true},
	{"REDIS_SENTINEL_AUTH", "", "the sentinels' password, or `user:password` (`REDIS_AUTH` is the data servers')", "what admit logs in to the sentinels of `REDIS_TYPE` `SENTINEL` as (never logged); with another `REDIS_TYPE` it has no effect and is named in the warning", true},
	{"REDIS_TIMEOUT", "10s", "the timeout of connecting to Redis and of each command", "set: the Redis command timeout, a decision's bound from the call to the reply, connecting included (as `server.redis_command_timeout`, which it wins over: 10ms-1m); unset: admit's 200ms, not 10s, so that a slow Redis reaches Envoy's `failure_mode_deny` in time", true},
	{"REDIS_TLS", "false", "connect to Redis over TLS", "`rediss://`, verified against the system roots or `REDIS_TLS_CACERT`", true},
	{"REDIS_TLS_CACERT", "", "the CAs of Redis's certificate", "`server.redis_tls.ca_file`", true},
	{"REDIS_TLS_CLIENT_CERT", "", "the client certificate for Redis", "`server.redis_tls.cert_file`", true},
	{"REDIS_TLS_CLIENT_KEY", "", "the client certificate's key", "`server.redis_tls.key_file`", true},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "skip the check of Redis's host name", "not honoured: admit always verifies the certificate", false},
	{"REDIS_POOL_SIZE", "10", "connections to Redis", "not honoured: one script a decision, pipelined on the client's own connections", false},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "what a call does when every pooled connection is busy (`WAIT` only; `CREATE` and `ERROR` refuse to start)", "not honoured: admit has no pool to wait for; a decision that cannot be sent within the command timeout fails UNAVAILABLE", false},
	{"REDIS_PIPELINE_WINDOW", "0", "how long commands wait to share a write", "not honoured (the URL option `max_flush_delay` is admit's own)", false},
	{"REDIS_PIPELINE_LIMIT", "0", "the most commands of one pipeline", "not honoured", false},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "health fails while Redis is unreachable", "always: the health service and `/healthcheck` follow a peek of Redis every second, as `GET /readyz` does", true},
	{"REDIS_PERSECOND*", "", "a second Redis for per-second limits", "not honoured: every limit is on `--redis`; a Redis Cluster spreads keys over its slots instead", false},
	{"MEMCACHE_*", "", "memcached's settings", "not honoured: admit decides on Redis", false},
	{"CACHE_KEY_PREFIX", "", "a prefix of every Redis key", "not honoured: keys are `rl:<name>:…`; separate tenants with a database (`/N`) or different HMAC secrets", false},
	{"EXPIRATION_JITTER_MAX_SECONDS", "300", "a random extra life of each key", "not honoured: a key expires when its state is no longer needed", false},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "stop counting hits over the limit", "unset or `true`: admit's rule, a rejected hit is never counted; set to `false`: `--envoy-increment-over-limit`, envoyproxy/ratelimit's counting", true},
	{"SHADOW_MODE", "false", "every rule in shadow mode", "`--shadow-mode`", true},
	{"QUOTA_MODE", "false", "every rule in quota mode: over its limit answered OK, reported in the dynamic metadata", "`--quota-mode`", true},
	{"LOCAL_CACHE_SIZE_IN_BYTES", "0", "the size of the local cache of over-limit keys (0: none)", "`--local-cache-size`: admit's over-limit cache of BYTES/256 entries (0: none)", true},
	{"NEAR_LIMIT_RATIO", "0.8", "the part of a limit past which a hit is near it", "`--near-limit-ratio`, counted in `admit_rls_near_limit_total`", true},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "false", "add the limit headers to every response", "`--limit-response-headers`", true},
	{"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "the name of the limit header", "not honoured: always `RateLimit-Limit`", false},
	{"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "the name of the remaining header", "not honoured: always `RateLimit-Remaining`", false},
	{"LIMIT_RESET_HEADER", "RateLimit-Reset", "the name of the reset header", "not honoured: always `RateLimit-Reset`", false},
	{"USE_STATSD", "true", "send stats to statsd", "not honoured: no statsd; Prometheus metrics on `GET /metrics`", false},
	{"STATSD_HOST", "localhost", "statsd's host", "not honoured", false},
	{"STATSD_PORT", "8125", "statsd's port", "not honoured", false},
	{"USE_DOG_STATSD*", "", "DogStatsD", "not honoured", false},
	{"EXTRA_TAGS", "", "tags of every stat", "not honoured", false},
	{"STATS_FLUSH_INTERVAL", "10s", "how often stats are sent", "not honoured", false},
	{"DISABLE_STATS", "false", "no stats", "not honoured: `/metrics` is always served", false},
	{"USE_PROMETHEUS", "false", "serve Prometheus metrics", "admit's metrics are always on, at `/metrics` of `PORT`; `true`: `--metrics-mode envoy_compat`, envoyproxy/ratelimit's per-rule series beside them, named as its mapping names them", true},
	{"PROMETHEUS_*", "", "the Prometheus listener, path and mapper", "not honoured: `/metrics` of `PORT`", false},
	{"TRACING_*", "", "OpenTelemetry traces", "not honoured", false},
}

// envoyEnv is what the environment of envoyproxy/ratelimit makes of admit serve's settings.
type envoyEnv struct {
	listen, grpcListen, envoyConfig string
	redisURL                        string
	logFormat                       string
	shadowMode, quotaMode           bool
	responseHeaders                 bool
	sentinelUser, sentinelPassword  string        // REDIS_SENTINEL_AUTH, for REDIS_TYPE SENTINEL
	commandTimeout                  time.Duration // REDIS_TIMEOUT; 0: not set
	envoy                           envoyFlags    // MERGE_DOMAIN_CONFIG, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, RESPONSE_DYNAMIC_METADATA, USE_PROMETHEUS
	nearLimitRatio                  float64
	localCacheSize                  int64
	grpcTLS                         policy.ServerTLS // GRPC_SERVER_*: the gRPC listener's TLS
	redisTLS                        policy.RedisTLS  // REDIS_TLS_*
	ignored                         []string         // the variables set and not honoured
}

// readEnvoyEnv reads envoyproxy/ratelimit's variables of environ (NAME=value each, as os.Environ);
// a variable is set when it is not empty. Its errors name the variable, never a password.
func readEnvoyEnv(environ []string) (envoyEnv, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			vars[k] = v
		}
	}
	getenv := func(name string) string { return vars[name] }
	get := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		for _, v := range envoyVars {
			if v.name == name {
				return v.def
			}
		}
		panic("envoyenv: no variable " + name)
	}
	var errs []error
	boolOf := func(name string) bool {
		b, err := strconv.ParseBool(get(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want true or false", name, get(name)))
		}
		return b
	}
	port := func(name string) string {
		p, err := strconv.Atoi(get(name))
		if err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %q: want a port, 0-65535", name, get(name)))
		}
		return get(name)
	}
	var e envoyEnv
	e.listen = net.JoinHostPort(get("HOST"), port("PORT"))
	e.grpcListen = net.JoinHostPort(get("GRPC_HOST"), port("GRPC_PORT"))
	e.envoyConfig = filepath.Join(get("RUNTIME_ROOT"), get("RUNTIME_SUBDIRECTORY"), get("RUNTIME_APPDIRECTORY"))
	boolOf("RUNTIME_WATCH_ROOT")
	boolOf("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")
	if e.logFormat = get("LOG_FORMAT"); e.logFormat != "text" && e.logFormat != "json" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT %q: want text or json", e.logFormat))
	}
	if v := get("CONFIG_TYPE"); !strings.EqualFold(v, "FILE") {
		errs = append(errs, fmt.Errorf("CONFIG_TYPE %q: admit reads FILE only", v))
	}
	if v := get("BACKEND_TYPE"); !strings.EqualFold(v, "redis") {
		errs = append(errs, fmt.Errorf("BACKEND_TYPE %q: admit decides on redis only", v))
	}
	e.shadowMode = boolOf("SHADOW_MODE")
	e.quotaMode = boolOf("QUOTA_MODE")
	if v := getenv("REDIS_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < policy.MinRedisCommandTimeout || d > policy.MaxRedisCommandTimeout {
			errs = append(errs, fmt.Errorf("REDIS_TIMEOUT %q: want a duration from 10ms to 1m, such as 500ms", v)) // MinRedisCommandTimeout, MaxRedisCommandTimeout
		}
		e.commandTimeout = d
	}
	e.envoy.mergeDomains = boolOf("MERGE_DOMAIN_CONFIG")
	e.envoy.dynamicMetadata = boolOf("RESPONSE_DYNAMIC_METADATA")
	e.envoy.metrics = boolOf("USE_PROMETHEUS")
	// Only an explicit false asks for envoyproxy/ratelimit's counting: unset keeps admit's rule.
	e.envoy.incrementOverLimit = getenv("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT") != "" && !boolOf("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")
	e.responseHeaders = boolOf("LIMIT_RESPONSE_HEADERS_ENABLED")
	var err error
	if e.nearLimitRatio, err = strconv.ParseFloat(get("NEAR_LIMIT_RATIO"), 64); err != nil || !(e.nearLimitRatio > 0 && e.nearLimitRatio <= 1) {
		errs = append(errs, fmt.Errorf("NEAR_LIMIT_RATIO %q: want a number more than 0 and at most 1", get("NEAR_LIMIT_RATIO")))
	}
	if e.localCacheSize, err = strconv.ParseInt(get("LOCAL_CACHE_SIZE_IN_BYTES"), 10, 64); err != nil || e.localCacheSize < 0 {
		errs = append(errs, fmt.Errorf("LOCAL_CACHE_SIZE_IN_BYTES %q: want a number of bytes, 0 or more", get("LOCAL_CACHE_SIZE_IN_BYTES")))
	}
	url, err := envoyRedisURL(get("REDIS_SOCKET_TYPE"), get("REDIS_TYPE"), get("REDIS_URL"), getenv("REDIS_AUTH"), boolOf("REDIS_TLS"))
	if err != nil {
		errs = append(errs, err)
	}
	e.redisURL = url
	if auth := getenv("REDIS_SENTINEL_AUTH"); auth != "" && strings.EqualFold(get("REDIS_TYPE"), "SENTINEL") {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			e.sentinelUser, e.sentinelPassword = user, pass
		} else {
			e.sentinelPassword = auth
		}
	} else if auth != "" {
		e.ignored = append(e.ignored, "REDIS_SENTINEL_AUTH") // for sentinels only, as envoyproxy/ratelimit reads it
	}
	e.redisTLS = policy.RedisTLS{CAFile: getenv("REDIS_TLS_CACERT"), CertFile: getenv("REDIS_TLS_CLIENT_CERT"), KeyFile: getenv("REDIS_TLS_CLIENT_KEY")}
	if boolOf("GRPC_SERVER_USE_TLS") {
		e.grpcTLS = policy.ServerTLS{CertFile: getenv("GRPC_SERVER_TLS_CERT"), KeyFile: getenv("GRPC_SERVER_TLS_KEY"), ClientCAFile: getenv("GRPC_CLIENT_TLS_CACERT")}
		if e.grpcTLS.CertFile == "" || e.grpcTLS.KeyFile == "" {
			errs = append(errs, errors.New("GRPC_SERVER_USE_TLS: wants GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"))
		}
	}
	for _, v := range envoyVars {
		if v.honoured {
			continue
		}
		prefix, family := strings.CutSuffix(v.name, "*")
		for name := range vars {
			if name == v.name || family && strings.HasPrefix(name, prefix) {
				e.ignored = append(e.ignored, name)
			}
		}
	}
	slices.Sort(e.ignored)
	return e, errors.Join(errs...)
}

// envoyRedisURL returns the redisstore URL of envoyproxy/ratelimit's Redis settings: the socket
// type (tcp or unix), the type (SINGLE, SENTINEL or CLUSTER, in any case), its address list, the
// password (or user:password) and TLS. Its errors never show the password.
func envoyRedisURL(socket, typ, addr, auth string, tls bool) (string, error) {
	u := url.URL{Scheme: "redis"}
	if tls {
		u.Scheme = "rediss"
	}
	if auth != "" {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.UserPassword("", auth)
		}
	}
	if strings.Contains(addr, "://") {
		return "", fmt.Errorf("REDIS_URL: under --envoy-env it is envoyproxy/ratelimit's host:port (or socket path); give a URL with --redis")
	}
	addrs := strings.Split(addr, ",")
	for i := range addrs {
		addrs[i] = strings.TrimSpace(addrs[i])
	}
	q := url.Values{}
	switch strings.ToUpper(typ) {
	case "SINGLE":
		if len(addrs) != 1 {
			return "", fmt.Errorf("REDIS_URL %q: REDIS_TYPE SINGLE wants one address", addr)
		}
	case "SENTINEL":
		if len(addrs) < 2 {
			return "", fmt.Errorf("REDIS_URL %q: REDIS_TYPE SENTINEL wants master_name,sentinel:port[,...]", addr)
		}
		q.Set("master_set", addrs[0])
		addrs = addrs[1:]
	case "CLUSTER":
	default:
		return "", fmt.Errorf("REDIS_TYPE %q: want SINGLE, SENTINEL or CLUSTER", typ)
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	switch strings.ToLower(socket) {
	case "tcp":
		u.Host = addrs[0]
	case "unix":
		if strings.ToUpper(typ) != "SINGLE" || tls {
			return "", fmt.Errorf("REDIS_SOCKET_TYPE unix: wants REDIS_TYPE SINGLE without REDIS_TLS")
		}
		u.Scheme, u.Path = "unix", addrs[0]
	default:
		return "", fmt.Errorf("REDIS_SOCKET_TYPE %q: want tcp or unix", socket)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
