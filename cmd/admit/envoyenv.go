package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

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
	{"RUNTIME_ROOT", "/srv/runtime_data/current", "the root of the runtime directory", "`--envoy-config` is RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY", true},
	{"RUNTIME_SUBDIRECTORY", "", "the runtime's subdirectory of RUNTIME_ROOT", "part of `--envoy-config`", true},
	{"RUNTIME_APPDIRECTORY", "config", "the directory of the YAML files in the subdirectory", "part of `--envoy-config`", true},
	{"RUNTIME_WATCH_ROOT", "true", "watch the root (a symlink swap) rather than the subdirectory", "admit polls the files of `--envoy-config`, which sees both a symlink swap and an edit in place: either value works", true},
	{"RUNTIME_IGNOREDOTFILES", "false", "skip files whose names start with a dot", "not honoured: admit reads the *.yaml and *.yml files of the directory", false},
	{"HOST", "0.0.0.0", "the HTTP listener's host", "the host of `--listen`", true},
	{"PORT", "8080", "the HTTP listener's port: /healthcheck, /json", "the port of `--listen`, which serves /healthcheck, /json, /metrics and admit's own paths", true},
	{"GRPC_HOST", "0.0.0.0", "the gRPC listener's host", "the host of `--grpc-listen`", true},
	{"GRPC_PORT", "8081", "the gRPC listener's port", "the port of `--grpc-listen`", true},
	{"GRPC_UDS", "", "a Unix socket for gRPC instead of GRPC_HOST:GRPC_PORT", "not honoured: admit listens for gRPC on TCP", false},
	{"DEBUG_HOST", "0.0.0.0", "the debug listener's host", "not honoured: admit has no debug listener; its /metrics is on PORT", false},
	{"DEBUG_PORT", "6070", "the debug listener's port: /rlconfig, /stats, pprof", "not honoured: admit has no debug listener; its /metrics is on PORT", false},
	{"GRPC_MAX_CONNECTION_AGE", "24h", "the longest life of a gRPC connection", "not honoured: admit closes connections idle for 5 minutes", false},
	{"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "the grace after GRPC_MAX_CONNECTION_AGE", "not honoured", false},
	{"GRPC_SERVER_USE_TLS", "false", "serve gRPC over TLS", "serves gRPC (only) over TLS, reloaded as `server.tls` is", true},
	{"GRPC_SERVER_TLS_CERT", "", "the gRPC server's certificate chain", "as `server.tls.cert_file`, for gRPC only", true},
	{"GRPC_SERVER_TLS_KEY", "", "the gRPC server's key", "as `server.tls.key_file`, for gRPC only", true},
	{"GRPC_CLIENT_TLS_CACERT", "", "the CAs of client certificates: mutual TLS", "as `server.tls.client_ca_file`, for gRPC only", true},
	{"GRPC_CLIENT_TLS_SAN", "", "the SAN a client certificate must have", "not honoured: any certificate of the CAs is accepted", false},
	{"LOG_LEVEL", "WARN", "the least level logged", "not honoured: admit logs from INFO", false},
	{"LOG_FORMAT", "text", "text or json", "`--log-format`", true},
	{"CONFIG_TYPE", "FILE", "FILE, or GRPC_XDS_SOTW for xDS", "FILE only: any other value refuses to start", true},
	{"REDIS_SOCKET_TYPE", "unix", "tcp or unix", "with REDIS_URL, the scheme of `--redis`: redis:// (rediss:// with REDIS_TLS) or unix://", true},
	{"REDIS_TYPE", "SINGLE", "SINGLE, SENTINEL or CLUSTER", "the form of `--redis`: SENTINEL's REDIS_URL `master,sentinel1:port,…` becomes `?master_set=master&addr=…`, CLUSTER's `host1:port,host2:port` becomes `?addr=…`", true},
	{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock", "Redis's address (host:port) or socket", "`--redis`, made a URL; admit's own REDIS_URL is not read under `--envoy-env`", true},
	{"REDIS_AUTH", "", "Redis's password, or user:password", "the user and password of `--redis`", true},
	{"REDIS_TLS", "false", "connect to Redis over TLS", "rediss:// in `--redis`", true},
	{"REDIS_TLS_CACERT", "", "the CAs of Redis's certificate", "`server.redis_tls.ca_file`", true},
	{"REDIS_TLS_CLIENT_CERT", "", "the client certificate for Redis", "`server.redis_tls.cert_file`", true},
	{"REDIS_TLS_CLIENT_KEY", "", "the client certificate's key", "`server.redis_tls.key_file`", true},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "skip the check of Redis's host name", "not honoured: admit always verifies", false},
	{"REDIS_POOL_SIZE", "10", "connections to Redis", "not honoured: admit pipelines on one connection per Redis node", false},
	{"REDIS_PIPELINE_WINDOW", "0", "how long commands wait to share a write", "not honoured (admit's `max_flush_delay` URL option is its own)", false},
	{"REDIS_PIPELINE_LIMIT", "0", "the most commands of one pipeline", "not honoured", false},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "health fails without a Redis connection", "always: health follows a peek of Redis every second", true},
	{"REDIS_PERSECOND", "false", "a second Redis for per-second limits", "not honoured: one Redis decides every unit", false},
	{"REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", "the per-second Redis", "not honoured", false},
	{"BACKEND_TYPE", "redis", "redis or memcache", "redis only: any other value refuses to start", true},
	{"MEMCACHE_HOST_PORT", "", "memcached's addresses", "not honoured: admit decides on Redis", false},
	{"SHADOW_MODE", "false", "every rule in shadow mode", "`--shadow-mode`", true},
	{"LOCAL_CACHE_SIZE_IN_BYTES", "0", "the size of the local cache of over-limit keys (0: none)", "`--local-cache-size`: admit's over-limit cache, of size/256 entries (0: none)", true},
	{"NEAR_LIMIT_RATIO", "0.8", "the part of a limit past which a hit is near it", "`--near-limit-ratio`, counted in `admit_rls_near_limit_total`", true},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "false", "add RateLimit-Limit, -Remaining and -Reset to responses", "`--limit-response-headers`", true},
	{"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "the name of the limit header", "not honoured: admit uses the default name", false},
	{"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "the name of the remaining header", "not honoured: admit uses the default name", false},
	{"LIMIT_RESET_HEADER", "RateLimit-Reset", "the name of the reset header", "not honoured: admit uses the default name", false},
	{"EXPIRATION_JITTER_MAX_SECONDS", "300", "a random extra life of each key", "not honoured: admit's keys expire with their windows", false},
	{"CACHE_KEY_PREFIX", "", "a prefix of every Redis key", "not honoured: admit's keys are its own (`rl:`…), so counters start afresh", false},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "stop counting hits over the limit", "not honoured: admit never counts a rejected hit", false},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "unhealthy until a configuration loads", "not honoured: admit refuses to start without a configuration", false},
	{"MERGE_DOMAIN_CONFIG", "false", "merge files of one domain", "not honoured", false},
	{"USE_STATSD", "true", "send stats to statsd", "not honoured: admit serves Prometheus metrics on /metrics", false},
	{"STATSD_HOST", "localhost", "statsd's host", "not honoured", false},
	{"STATSD_PORT", "8125", "statsd's port", "not honoured", false},
	{"USE_PROMETHEUS", "false", "serve Prometheus metrics", "not honoured: /metrics is always on PORT", false},
	{"PROMETHEUS_ADDR", ":9090", "the Prometheus listener", "not honoured: /metrics is on PORT", false},
	{"TRACING_ENABLED", "false", "OpenTelemetry traces", "not honoured", false},
}

// envoyEnv is what the environment of envoyproxy/ratelimit makes of admit serve's settings.
type envoyEnv struct {
	listen, grpcListen, envoyConfig string
	redisURL                        string
	logFormat                       string
	shadowMode, responseHeaders     bool
	nearLimitRatio                  float64
	localCacheSize                  int64
	grpcTLS                         policy.ServerTLS // GRPC_SERVER_*: the gRPC listener's TLS
	redisTLS                        policy.RedisTLS  // REDIS_TLS_*
	ignored                         []string         // the variables set and not honoured
}

// readEnvoyEnv reads envoyproxy/ratelimit's environment through getenv; a variable is set when
// it is not empty. Its errors name the variable, never a password.
func readEnvoyEnv(getenv func(string) string) (envoyEnv, error) {
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
	e.redisTLS = policy.RedisTLS{CAFile: getenv("REDIS_TLS_CACERT"), CertFile: getenv("REDIS_TLS_CLIENT_CERT"), KeyFile: getenv("REDIS_TLS_CLIENT_KEY")}
	if boolOf("GRPC_SERVER_USE_TLS") {
		e.grpcTLS = policy.ServerTLS{CertFile: getenv("GRPC_SERVER_TLS_CERT"), KeyFile: getenv("GRPC_SERVER_TLS_KEY"), ClientCAFile: getenv("GRPC_CLIENT_TLS_CACERT")}
		if e.grpcTLS.CertFile == "" || e.grpcTLS.KeyFile == "" {
			errs = append(errs, errors.New("GRPC_SERVER_USE_TLS: wants GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"))
		}
	}
	for _, v := range envoyVars {
		if !v.honoured && getenv(v.name) != "" {
			e.ignored = append(e.ignored, v.name)
		}
	}
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
			return "", fmt.Errorf("REDIS_URL %q: REDIS_TYPE SENTINEL wants master_name,sentinel:port[,…]", addr)
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
