package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
)

// errDurability is the error of a replicated policy the backend cannot serve.
var errDurability = errors.New("a replicated policy cannot be served by this backend")

// policyReplicas returns the most replicas a policy of cfg, or a tier of one, waits for
// (durability: replicated), and which; 0 when every policy is async.
func policyReplicas(cfg *policy.Config) (n int, which string) {
	for _, p := range cfg.Policies {
		if p.Limit.Replicas > n {
			n, which = p.Limit.Replicas, "policy "+p.Limit.Name
		}
		for _, t := range slices.Sorted(maps.Keys(p.Tiers)) {
			if r := p.Tiers[t].Replicas; r > n {
				n, which = r, "policy "+p.Limit.Name+" tier "+t
			}
		}
	}
	return n, which
}

// checkDurability checks that backend can serve which, a configuration waiting for n replicas
// (docs/running-redis.md, "Durability"). The in-memory store cannot: it has no replicas, and its
// state goes with the process. On Redis it runs redisstore's PreflightReplicas: too few connected
// replicas, or a user that may not read INFO, is an error; its warnings (min-replicas-to-write
// unset) are logged. A Redis that does not answer is logged and let be: admit starts anyway, as
// for its other preflight, and replicated decisions are undecided until the replicas confirm.
func checkDurability(ctx context.Context, backend admit.Store, n int, which string, logger *slog.Logger) error {
	if n == 0 {
		return nil
	}
	rs, ok := backend.(*redisstore.Store)
	if !ok {
		return fmt.Errorf("%w: %s has durability: replicated, and the in-memory store has no replicas to confirm a write (its state goes with the process): set server.redis, or make it durability: async", errDurability, which)
	}
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	warnings, err := rs.PreflightReplicas(ctx, n)
	switch {
	case errors.Is(err, admit.ErrUnavailable):
		logger.Warn("Redis preflight of replicas: Redis does not answer; replicated decisions are undecided until it does", "for", which, "replicas", n, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s waits for %d replicas: %w", errDurability, which, n, err)
	}
	for _, w := range warnings {
		logger.Warn("Redis preflight of replicas: "+w, "for", which, "replicas", n)
	}
	return nil
}
