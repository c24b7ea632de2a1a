package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/memstore"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/redisstore"
)

const replicatedConfig = `policies:
  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}
  - {name: pay, algorithm: fixed_window, limit: 5, window: 1m, durability: replicated, tiers: {big: {limit: 50}}}
routes:
  - {path_prefix: /, policies: [api, pay]}
`

// A replicated policy on the in-memory store refuses to start, saying why.
func TestReplicatedOnMemoryRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, file, replicatedConfig)
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--config", file, "--redis", ""}, &bytes.Buffer{}, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "policy pay has durability: replicated, and the in-memory store has no replicas") {
		t.Errorf("serve with a replicated policy in memory: exit %d, stderr %q; want 2 saying why", code, stderr.String())
	}
}

func TestPolicyReplicas(t *testing.T) {
	cfg, err := policy.Parse("r.yaml", []byte(replicatedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if n, which := policyReplicas(cfg); n != 1 || which != "policy pay" {
		t.Errorf("policyReplicas = %d, %q; want 1, policy pay", n, which)
	}
	cfg, err = policy.Parse("r.yaml", []byte("policies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := policyReplicas(cfg); n != 0 {
		t.Errorf("policyReplicas of async policies = %d; want 0", n)
	}
}

// checkDurability against real Redis: a lone server has no replica, a primary with one does.
func TestCheckDurability(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	if err := checkDurability(ctx, memstore.New(memstore.Options{}), 0, "nothing", logger); err != nil {
		t.Errorf("no replicated policy on memory: %v", err)
	}
	lone := redistest.Start(t)
	s, err := redisstore.New(redisstore.Config{URL: lone.AdminURL(), CommandTimeout: preflightTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := checkDurability(ctx, s, 1, "policy pay", logger); !errors.Is(err, errDurability) || !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Errorf("a replicated policy on a lone server: %v; want ErrTooFewReplicas", err)
	}
	var logs bytes.Buffer
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(lone.Port()))
	waitConnected(t, lone)
	if err := checkDurability(ctx, s, 1, "policy pay", slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Errorf("a replicated policy on a primary with a replica: %v", err)
	}
	if !strings.Contains(logs.String(), "min-replicas-to-write is unset") {
		t.Errorf("no warning about min-replicas-to-write: %s", logs.String())
	}
}

// waitConnected waits until srv lists a connected replica.
func waitConnected(t *testing.T, srv *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if info, _ := srv.Do(t, "INFO", "replication").ToString(); strings.Contains(info, "connected_slaves:1\r\n") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no replica connected within a minute")
}
