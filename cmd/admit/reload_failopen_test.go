package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/metrics"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/prometheus/client_golang/prometheus"
)

// downStore is a backend that can never decide.
type downStore struct{}

var errDown = fmt.Errorf("backend down: %w", admit.ErrUnavailable)

func (downStore) Take(context.Context, admit.Request) (admit.Decision, error) {
	return admit.Decision{}, errDown
}
func (downStore) TakeAll(context.Context, []admit.Request, []admit.Decision) (bool, error) {
	return false, errDown
}
func (downStore) Release(context.Context, admit.Lease) error { return errDown }
func (downStore) Settle(context.Context, admit.Reservation, int64) (admit.Decision, error) {
	return admit.Decision{}, errDown
}
func (downStore) Reset(context.Context, []string) error { return errDown }

const reloadFailureConfig = "policies:\n  - name: api\n    algorithm: fixed_window\n    limit: 100\n    window: 1m\n%s"

// The failure settings of reloadFailureConfig's policy.
var failureSettings = map[string]string{"closed": "", "open": "    failure: open\n    local_limit: 2\n"}

// TestReloadGivesFailOpenItsLocalLimits: the reload path hands each configuration's local limits
// down to the guard.FailOpen of guardStack, which asks nothing of the Service: a policy that a
// reload makes fail open is decided by the local limiter while the backend is down, and one that a
// reload makes fail closed again answers the backend's error.
func TestReloadGivesFailOpenItsLocalLimits(t *testing.T) {
	file := filepath.Join(t.TempDir(), "admit.yaml")
	writeFile(t, file, fmt.Sprintf(reloadFailureConfig, failureSettings["closed"]))
	cfg, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := guardStack(prometheus.NewRegistry(), downStore{}, false, 0, 0, policy.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	g.failOpen.SetLocalLimits(service.LocalLimits(cfg)) // as the daemon starts
	keys, err := admit.NewKeyBuilder([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(g.top, keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.NewConfig(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &reloader{file: file, svc: svc, failOpen: g.failOpen, metrics: m, logger: slog.New(slog.DiscardHandler), server: cfg.Server}
	check := func() (service.Result, error) {
		return svc.Check(t.Context(), service.Check{Policies: []string{"api"}, Subject: admit.Subject{ID: "alice"}, Cost: 1})
	}
	if _, err := check(); !errors.Is(err, errDown) {
		t.Fatalf("failure: closed with the backend down: %v; want the backend's error", err)
	}
	for i, failure := range []string{"open", "closed"} {
		writeFile(t, file, fmt.Sprintf(reloadFailureConfig, failureSettings[failure]))
		if hash := r.reload(r.svc.Config().Hash, true); hash != r.svc.Config().Hash {
			t.Fatalf("reload %d: hash %s, the Service holds %s", i, hash, r.svc.Config().Hash)
		}
		res, err := check()
		switch {
		case failure == "open" && (err != nil || !res.Allowed || !res.Degraded || res.Decisions[0].Limit.Rate != 2):
			t.Errorf("reloaded to failure: open, backend down: %+v, %v; want admitted, degraded, by the local limit 2", res, err)
		case failure == "closed" && !errors.Is(err, errDown):
			t.Errorf("reloaded to failure: closed, backend down: %+v, %v; want the backend's error", res, err)
		}
	}
}

// TestDemoConfigIsDemoLimit: the built-in configuration that GET /demo is decided under has the one
// policy demoLimit, in version bound.DefaultVersion, so that its key is the README's
// (TestDemoKeyIsREADMEs).
func TestDemoConfigIsDemoLimit(t *testing.T) {
	cfg, err := policy.Parse("built-in", []byte(demoConfig))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Policies) != 1 || cfg.Policies[0].Limit != demoLimit() || cfg.Policies[0].Version != bound.DefaultVersion {
		t.Errorf("built-in configuration %+v; want the one policy %v in version %s", cfg.Policies, demoLimit(), bound.DefaultVersion)
	}
}

func (downStore) SetOverride(context.Context, admit.Override) error { return errDown }
func (downStore) Override(context.Context, string) (admit.Override, bool, error) {
	return admit.Override{}, false, errDown
}
func (downStore) DeleteOverride(context.Context, string) (bool, error) { return false, errDown }
func (downStore) Overrides(context.Context, string, string, int) ([]admit.Override, string, error) {
	return nil, "", errDown
}
func (downStore) OverrideCount(context.Context, string) (int64, error) { return 0, errDown }
