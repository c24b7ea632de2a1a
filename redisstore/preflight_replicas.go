package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// ErrTooFewReplicas means a primary has fewer connected replicas than a replicated policy waits for
// (admit.Limit.Replicas): every admission under it would be undecided.
var ErrTooFewReplicas = errors.New("redisstore: too few replicas")

// PreflightReplicas checks, before a replicated policy (admit.Limit.Replicas) decides anything,
// that every primary the store writes to has at least n connected replicas (INFO replication's
// connected_slaves; on a cluster, every master). Fewer is an error matching ErrTooFewReplicas that
// names the primary and both numbers: with fewer replicas than it waits for, every admission of the
// policy would be undecided. INFO refused (the least-privilege user of ACLRules has no +info; a
// replicated policy's user needs it) is an error matching ErrPermission; a connection failure one
// matching admit.ErrUnavailable. It returns warnings: min-replicas-to-write unset (0), or unreadable
// (CONFIG GET refused), for then a primary cut off from its replicas goes on accepting the writes of
// async policies, and a failover forgets them (docs/running-redis.md, "Durability"). n must be 1 to
// 16.
func (s *Store) PreflightReplicas(ctx context.Context, n int) ([]string, error) {
	if n < 1 || n > 16 {
		return nil, fmt.Errorf("redisstore: preflight: replicas %d outside 1-16", n)
	}
	c, err := s.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: preflight: %w", err)
	}
	nodes := c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	var warnings []string
	for _, addr := range addrs {
		node := nodes[addr]
		w, err := s.checkReplicas(ctx, node, addr, n)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	return warnings, nil
}

// checkReplicas is PreflightReplicas on one node, at addr: a replica (a cluster's Nodes may list
// them) is not checked.
func (s *Store) checkReplicas(ctx context.Context, node rueidis.Client, addr string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.commandTimeout)
	defer cancel()
	info, err := node.Do(ctx, node.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return nil, preflightError("INFO replication on "+addr+" (a replicated policy's user needs +info)", err)
	}
	role, connected, err := parseReplication(info)
	if err != nil {
		return nil, fmt.Errorf("redisstore: preflight: INFO replication on %s: %w", addr, unavailable(err))
	}
	if role != "master" {
		return nil, nil
	}
	if connected < n {
		return nil, fmt.Errorf("%w: the primary %s has %d connected replicas; a replicated policy waits for %d: add replicas, or lower durability_replicas", ErrTooFewReplicas, addr, connected, n)
	}
	m, err := node.Do(ctx, node.B().ConfigGet().Parameter("min-replicas-to-write").Build()).AsStrMap()
	var re *rueidis.RedisError
	switch {
	case errors.As(err, &re):
		return []string{fmt.Sprintf("%s: min-replicas-to-write unknown (CONFIG GET refused): unless it is set, a primary cut off from its replicas goes on accepting writes that a failover forgets", addr)}, nil
	case err != nil:
		return nil, preflightError("CONFIG GET min-replicas-to-write on "+addr, err)
	case m["min-replicas-to-write"] == "" || m["min-replicas-to-write"] == "0":
		return []string{fmt.Sprintf("%s: min-replicas-to-write is unset: a primary cut off from its replicas goes on accepting writes that a failover forgets (async policies lose them; replicated ones answer undecided)", addr)}, nil
	}
	return nil, nil
}

// parseReplication reads role and connected_slaves out of INFO replication's text.
func parseReplication(info string) (role string, connected int, err error) {
	seen := false
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case !ok:
		case k == "role":
			role = v
		case k == "connected_slaves":
			if connected, err = strconv.Atoi(v); err != nil || connected < 0 {
				return "", 0, fmt.Errorf("connected_slaves %q is not a count", v)
			}
			seen = true
		}
	}
	if role == "" || role == "master" && !seen {
		return "", 0, errors.New("no role or no connected_slaves in the reply")
	}
	return role, connected, nil
}
