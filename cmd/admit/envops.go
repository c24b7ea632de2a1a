package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/transport/rls"
)

// opsConfig is the part of admit serve's command line about envoyproxy/ratelimit's operations
// surface (docs/envoy.md, "Operations"): its flags, and what --envoy-env read.
type opsConfig struct {
	envoyEnv        bool    // --envoy-env: read envoyproxy/ratelimit's environment (envoyVars)
	reflection      bool    // --grpc-reflection
	shadowMode      bool    // --shadow-mode
	quotaMode       bool    // --quota-mode
	responseHeaders bool    // --limit-response-headers
	nearLimitRatio  float64 // --near-limit-ratio
	localCacheSize  int64   // --local-cache-size: bytes of over-limit cache; -1: server.local_cache_max_age decides
	grpcTLS         policy.ServerTLS
	redisTLSSet     bool          // REDIS_TLS_* gave the Redis TLS files: the file's server.redis_tls does not replace them
	commandTimeout  time.Duration // REDIS_TIMEOUT: the Redis command timeout, over the file's; 0: not set
	ignored         []string      // envoyproxy/ratelimit's variables set and not honoured, warned of at startup
}

// overLimitEntryBytes is what one entry of the over-limit cache is taken to weigh, to turn
// --local-cache-size's bytes into guard.OverLimitOptions.MaxEntries.
const overLimitEntryBytes = 256

// opsFlags defines the flags of envoyproxy/ratelimit's operations on fs, into cfg.ops.
func opsFlags(fs *flag.FlagSet, cfg *serveConfig) {
	o := &cfg.ops
	fs.BoolVar(&o.envoyEnv, "envoy-env", false, "read envoyproxy/ratelimit's environment (RUNTIME_ROOT, PORT, GRPC_PORT, REDIS_URL, ...) into these flags; a flag given wins (docs/envoy.md)")
	fs.BoolVar(&o.reflection, "grpc-reflection", false, "serve gRPC server reflection (grpc.reflection.v1) beside the rate limit service")
	fs.BoolVar(&o.shadowMode, "shadow-mode", false, "put every rule of --envoy-config in shadow mode: decided and counted, never OVER_LIMIT")
	fs.BoolVar(&o.quotaMode, "quota-mode", false, "put every rule of --envoy-config in quota mode: over its limit answered OK, listed in quotaModeViolations with --envoy-dynamic-metadata")
	fs.BoolVar(&o.responseHeaders, "limit-response-headers", false, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to the rate limit service's responses")
	fs.Float64Var(&o.nearLimitRatio, "near-limit-ratio", rls.DefaultNearLimitRatio, "the `RATIO` of a limit past which a hit counts in admit_rls_near_limit_total (0 < RATIO <= 1)")
	fs.Int64Var(&o.localCacheSize, "local-cache-size", -1, "`BYTES` of the local cache of over-limit keys (0: none; default: server.local_cache_max_age decides)")
}

// applyEnvoyEnv applies envoyproxy/ratelimit's variables of environ to cfg, where
// no flag was given.
func (cfg *serveConfig) applyEnvoyEnv(environ []string) error {
	e, err := readEnvoyEnv(environ)
	if err != nil {
		return fmt.Errorf("--envoy-env: %w", err)
	}
	set := func(flag string, apply func()) {
		if !cfg.given[flag] {
			apply()
		}
	}
	set("listen", func() { cfg.listen, cfg.listenSet = e.listen, true })
	set("grpc-listen", func() { cfg.grpcListen = e.grpcListen })
	set("envoy-config", func() { cfg.envoyConfig = e.envoyConfig })
	set("redis", func() {
		cfg.redisURL, cfg.sentinelUser, cfg.sentinelPass = e.redisURL, e.sentinelUser, e.sentinelPassword
	})
	set("log-format", func() { cfg.logFormat = e.logFormat })
	set("shadow-mode", func() { cfg.ops.shadowMode = e.shadowMode })
	set("quota-mode", func() { cfg.ops.quotaMode = e.quotaMode })
	cfg.ops.commandTimeout = e.commandTimeout
	set("envoy-merge-domains", func() { cfg.envoy.mergeDomains = e.envoy.mergeDomains })
	set("envoy-increment-over-limit", func() { cfg.envoy.incrementOverLimit = e.envoy.incrementOverLimit })
	set("envoy-dynamic-metadata", func() { cfg.envoy.dynamicMetadata = e.envoy.dynamicMetadata })
	if !cfg.given["metrics-mode"] {
		set("envoy-metrics", func() { cfg.envoy.metrics = e.envoy.metrics })
	}
	set("limit-response-headers", func() { cfg.ops.responseHeaders = e.responseHeaders })
	set("near-limit-ratio", func() { cfg.ops.nearLimitRatio = e.nearLimitRatio })
	set("local-cache-size", func() { cfg.ops.localCacheSize = e.localCacheSize })
	if e.redisTLS != (policy.RedisTLS{}) {
		cfg.redisTLS, cfg.ops.redisTLSSet = e.redisTLS, true
	}
	cfg.ops.grpcTLS = e.grpcTLS
	cfg.ops.ignored = e.ignored
	return nil
}

// check reports what is wrong with o's flags.
func (o opsConfig) check() error {
	if r := o.nearLimitRatio; !(r > 0 && r <= 1) {
		return fmt.Errorf("--near-limit-ratio %v: want more than 0 and at most 1", r)
	}
	if o.localCacheSize < -1 {
		return fmt.Errorf("--local-cache-size %d: want 0 or more bytes", o.localCacheSize)
	}
	return nil
}

// useGRPCTLS puts the TLS of GRPC_SERVER_USE_TLS, if any, in srv.TLS, and reports whether it
// did: then TLS is gRPC's only, as envoyproxy/ratelimit has it. With the file's server.tls too it
// is an error.
func (o opsConfig) useGRPCTLS(srv *policy.Server) (bool, error) {
	if !o.grpcTLS.Enabled() {
		return false, nil
	}
	if srv.TLS.Enabled() {
		return false, errors.New("GRPC_SERVER_USE_TLS and the file's server.tls are both set: keep one")
	}
	srv.TLS = o.grpcTLS
	return true, nil
}

// warnIgnored logs, once, the variables of envoyproxy/ratelimit that are set and that admit does
// not honour.
func (o opsConfig) warnIgnored(logger *slog.Logger) {
	if len(o.ignored) > 0 {
		logger.Warn("envoyproxy/ratelimit settings not honoured by admit; they have no effect (docs/envoy.md#environment-variables)",
			"variables", strings.Join(o.ignored, ","))
	}
}

// overLimitCache returns the over-limit cache's entries (0: guard's default) and MaxAge (0: no
// cache) of o's --local-cache-size, for the file's server.local_cache_max_age of maxAge.
func (o opsConfig) overLimitCache(maxAge time.Duration) (entries int, age time.Duration) {
	switch n := o.localCacheSize; {
	case n < 0:
		return 0, maxAge
	case n == 0:
		return 0, 0
	default:
		if maxAge == 0 {
			maxAge = policy.DefaultLocalCacheMaxAge
		}
		return int(max(1, min(n/overLimitEntryBytes, 1<<24))), maxAge
	}
}

// rlsOps returns the rate limit service's Ops of o, counting near-limit hits with near.
func (o opsConfig) rlsOps(near func(domain string, hits int64)) rls.Ops {
	return rls.Ops{ShadowMode: o.shadowMode, QuotaMode: o.quotaMode, ResponseHeaders: o.responseHeaders, NearLimitRatio: o.nearLimitRatio, NearLimit: near}
}
