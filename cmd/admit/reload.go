package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/admit-dev/admit"

	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// reloadPollInterval is how often admit serve looks at its configuration file for a change.
const reloadPollInterval = time.Second

// A reloader reloads the configuration file into a Service on SIGHUP and when the file changes.
// A file with errors is logged and counted, and the loaded configuration keeps serving; a good one
// replaces it whole (service.Service.Swap), so requests in flight finish on the one they started
// with, and gives its policies' local limits to the FailOpen (guard.FailOpen.SetLocalLimits). Server settings (listen address, Redis, secret) are read at start only: a reload that
// changes them logs which need a restart, and applies the policies.
type reloader struct {
	file     string
	svc      *service.Service
	failOpen *guard.FailOpen // given each configuration's local limits; nil for none
	metrics  *metrics.Config
	logger   *slog.Logger
	server   policy.Server // the settings in effect
	backend  admit.Store   // what a replicated policy is checked against (checkDurability); nil: not checked
}

// run reloads until ctx is done: on SIGHUP, and when the file's bytes change, looked at every poll.
// A file that cannot be read (deleted, say) is logged at the first poll that finds it so, once,
// and counted as a failed reload; the loaded configuration keeps serving.
func (r *reloader) run(ctx context.Context, poll time.Duration) {
	last := r.svc.Config().Hash
	unreadable := false // reported since the file was last read
	onPollOrHUP(ctx, poll, func(hup bool) {
		if hup {
			r.logger.Info("reloading the configuration", "file", r.file, "cause", "SIGHUP")
			last = r.reload(last, true)
			return
		}
		data, err := os.ReadFile(r.file)
		if err != nil {
			if !unreadable {
				unreadable = true
				r.metrics.Failed()
				r.logger.Error("cannot read the configuration file; the loaded one keeps serving", "file", r.file, "error", err)
			}
			return
		}
		if unreadable {
			unreadable = false
			r.logger.Info("the configuration file can be read again", "file", r.file)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != last {
			r.logger.Info("reloading the configuration", "file", r.file, "cause", "changed")
			last = r.reload(last, false)
		}
	})
}

// onPollOrHUP calls check every poll, with hup false, and on each SIGHUP, with hup true, until ctx
// is done: the loop of every reload of admit serve (its configuration, Envoy's rules, the TLS files
// and the client tokens). SIGHUP is caught from the call on.
func onPollOrHUP(ctx context.Context, poll time.Duration, check func(hup bool)) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			check(true)
		case <-tick.C:
			check(false)
		}
	}
}

// reload loads the file and, if it is valid, swaps it in. It returns the hash of the file it read,
// good or bad (so that a bad file is reported once, not at every poll), or last if it could not
// read one. force reloads a file whose hash is last too.
func (r *reloader) reload(last string, force bool) string {
	cfg, err := policy.Load(r.file)
	if err != nil {
		r.metrics.Failed()
		r.logger.Error("configuration not reloaded; the loaded one keeps serving", "file", r.file, "error", err)
		if data, rerr := os.ReadFile(r.file); rerr == nil {
			sum := sha256.Sum256(data)
			return hex.EncodeToString(sum[:])
		}
		return last
	}
	if cfg.Hash == last && !force {
		return last
	}
	if n, which := policyReplicas(cfg); n > 0 && r.backend != nil {
		if err := checkDurability(context.Background(), r.backend, n, which, r.logger); err != nil {
			r.metrics.Failed()
			r.logger.Error("configuration not reloaded; the loaded one keeps serving", "file", r.file, "error", err)
			return cfg.Hash
		}
	}
	if changed := serverChanges(r.server, cfg.Server); len(changed) > 0 {
		r.logger.Warn("server settings changed; they take effect at the next start, the running ones stay",
			"file", r.file, "changed", strings.Join(changed, ","))
	}
	r.svc.Swap(cfg)
	if r.failOpen != nil {
		r.failOpen.SetLocalLimits(service.LocalLimits(cfg))
	}
	r.metrics.Loaded(cfg.Hash, true)
	r.logger.Info("configuration reloaded", "file", r.file, "policies", len(cfg.Policies), "hash", cfg.Hash)
	return cfg.Hash
}

// serverChanges returns the fields of the server settings, as the file names them, that differ
// between a and b.
func serverChanges(a, b policy.Server) []string {
	var changed []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"server.listen", a.Listen == b.Listen},
		{"server.redis", a.Redis == b.Redis},
		{"server.redis_tls", a.RedisTLS == b.RedisTLS},
		{"server.hmac_secret_file", a.HMACSecretFile == b.HMACSecretFile},
		{"server.trusted_proxies", slices.Equal(a.TrustedProxies, b.TrustedProxies)},
		{"server.forwarded_header", a.ForwardedHeader == b.ForwardedHeader},
		{"server.ipv6_prefix", a.IPv6Prefix == b.IPv6Prefix},
		{"server.ratelimit_headers", a.RateLimitHeaders == b.RateLimitHeaders},
		{"server.local_cache_max_age", a.LocalCacheMaxAge == b.LocalCacheMaxAge},
		{"server.redis_command_timeout", a.RedisCommandTimeout == b.RedisCommandTimeout},
		{"server.breaker", a.Breaker == b.Breaker},
		{"server.tls", a.TLS == b.TLS}, // the files' names; their contents are reloaded
		{"server.client_tokens_file", a.ClientTokensFile == b.ClientTokensFile},
		{"server.trust_network", a.TrustNetwork == b.TrustNetwork},
	} {
		if !f.same {
			changed = append(changed, f.name)
		}
	}
	return changed
}
