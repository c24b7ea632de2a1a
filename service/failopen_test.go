package service_test

import (
	"errors"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/guard"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/redisstore"
	"github.com/admit-dev/admit/service"
)

const failOpenPolicies = `
policies:
  - name: open
    algorithm: fixed_window
    limit: 100
    window: 1m
    failure: open
    local_limit: 3
  - name: closed
    algorithm: fixed_window
    limit: 100
    window: 1m
`

// newFailOpenService returns a Service under src over the stack admit serve builds — a
// guard.FailOpen consulting the Service's LocalLimit — on a Redis that cannot be reached.
func newFailOpenService(t *testing.T, src string) *service.Service {
	t.Helper()
	redis, err := redisstore.New(redisstore.Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Close() })
	var svc *service.Service // made below, before any Check
	failOpen := guard.NewFailOpen(redis, guard.FailOpenOptions{Local: func(lim admit.Limit) (int64, bool) { return svc.LocalLimit(lim) }})
	t.Cleanup(failOpen.Close)
	svc = newService(t, failOpen, src)
	return svc
}

// TestFailureOpen: with Redis unreachable, a policy with failure: open is decided by its local
// limit, degraded; a Check that names a policy with failure: closed fails closed, whole, and consumes
// nothing locally.
func TestFailureOpen(t *testing.T) {
	s := newFailOpenService(t, failOpenPolicies)
	open := service.Check{Policies: []string{"open"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	both := service.Check{Policies: []string{"open", "closed"}, Subject: admit.Subject{ID: "alice"}, Cost: 1}
	for i := range 5 {
		if _, err := s.Check(t.Context(), both); !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("check %d of open and closed together: %v; want admit.ErrUnavailable", i, err)
		}
	}
	for i := range 5 {
		res, err := s.Check(t.Context(), open)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if !res.Degraded || res.Allowed != (i < 3) {
			t.Errorf("check %d: allowed %v, degraded %v; want allowed %v (local limit 3), degraded", i, res.Allowed, res.Degraded, i < 3)
		}
	}
}

// TestFailureModeReload: the failure mode and local limit are read from the configuration the
// Service holds now: a reload that closes a policy fails it closed from the next Check on.
func TestFailureModeReload(t *testing.T) {
	s := newFailOpenService(t, failOpenPolicies)
	open := service.Check{Policies: []string{"open"}, Subject: admit.Subject{ID: "bob"}, Cost: 1}
	if res, err := s.Check(t.Context(), open); err != nil || !res.Degraded {
		t.Fatalf("before the reload: %+v, %v; want a degraded decision", res, err)
	}
	s.Swap(mustParse(t, `
policies:
  - name: open
    algorithm: fixed_window
    limit: 100
    window: 1m
`))
	if _, err := s.Check(t.Context(), open); !errors.Is(err, admit.ErrUnavailable) {
		t.Errorf("after a reload to failure: closed: %v; want admit.ErrUnavailable", err)
	}
}
