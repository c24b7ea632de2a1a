package replsession_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/replsession"
)

// A pending records its Waits and Releases; its Wait returns err, after meeting every other
// pending of its barrier when it has one.
type pending struct {
	mu             sync.Mutex
	waits, release int
	err            error
	barrier        *sync.WaitGroup
}

func (p *pending) Wait(ctx context.Context) error {
	if p.barrier != nil {
		p.barrier.Done()
		met := make(chan struct{})
		go func() { p.barrier.Wait(); close(met) }()
		select {
		case <-met:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits++
	return p.err
}

func (p *pending) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release++
}

func (p *pending) counts() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waits, p.release
}

func TestFromWithoutSession(t *testing.T) {
	if s := replsession.From(context.Background()); s != nil {
		t.Fatalf("From a context without a session: %v, want nil", s)
	}
	var s *replsession.Session
	if p, ok := s.Join("owner", func() replsession.Pending { return &pending{} }); ok || p != nil {
		t.Errorf("Join on a nil session: %v, %v; want none, false", p, ok)
	}
	if err := s.Wait(context.Background()); err != nil {
		t.Errorf("Wait on a nil session: %v", err)
	}
	if s.After(func(error) { t.Error("an After func of a nil session called") }) {
		t.Error("After on a nil session reported true")
	}
	s.Abort(errors.New("failed"))
}

// Join makes one Pending per owner, on its first Join; Wait waits for each once, passes its result
// to each After func, once, and ends the session: a Join or an After after it reports false, and a
// second Wait or an Abort does nothing.
func TestJoinOncePerOwner(t *testing.T) {
	ctx, s := replsession.New(context.Background())
	if got := replsession.From(ctx); got != s {
		t.Fatalf("From the session's context: %p, want %p", got, s)
	}
	opened := 0
	open := func() replsession.Pending { opened++; return &pending{} }
	a1, ok1 := s.Join("a", open)
	a2, ok2 := s.Join("a", open)
	b, ok3 := s.Join("b", open)
	if !ok1 || !ok2 || !ok3 || a1 != a2 || a1 == b || opened != 2 {
		t.Fatalf("Joins: a %p %p, b %p (%v %v %v), %d opened; want one Pending per owner, 2 opened", a1, a2, b, ok1, ok2, ok3, opened)
	}
	var after []error
	for range 2 {
		if !s.After(func(err error) { after = append(after, err) }) {
			t.Fatal("After on a session that has not ended reported false")
		}
	}
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s.Abort(errors.New("failed"))
	if len(after) != 2 || after[0] != nil || after[1] != nil {
		t.Errorf("After funcs called with %v, want twice with nil", after)
	}
	if s.After(func(error) { t.Error("an After func registered after Wait called") }) {
		t.Error("After after Wait reported true")
	}
	for name, p := range map[string]*pending{"a": a1.(*pending), "b": b.(*pending)} {
		if w, r := p.counts(); w != 1 || r != 0 {
			t.Errorf("owner %s: %d Waits, %d Releases; want 1 Wait, no Release", name, w, r)
		}
	}
	if p, ok := s.Join("c", open); ok || p != nil || opened != 2 {
		t.Errorf("Join after Wait: %v, %v, %d opened; want none, false, nothing opened", p, ok, opened)
	}
}

// Abort ends the session without waiting: each Pending released once, none waited for, the
// After funcs called once with Abort's error.
func TestAbort(t *testing.T) {
	ctx, s := replsession.New(context.Background())
	p := &pending{}
	s.Join("a", func() replsession.Pending { return p })
	var after []error
	s.After(func(err error) { after = append(after, err) })
	failed := errors.New("a call failed")
	s.Abort(failed)
	s.Abort(errors.New("again"))
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if w, r := p.counts(); w != 0 || r != 1 {
		t.Errorf("%d Waits, %d Releases; want no Wait, 1 Release", w, r)
	}
	if len(after) != 1 || after[0] != failed {
		t.Errorf("After funcs called with %v, want once with %v", after, failed)
	}
}

// Several Pendings are waited for in parallel: each Wait returns only once every other has begun
// (a hang guard of a minute fails the test if they run one after the other), and their errors
// are joined, and passed so to the After funcs.
func TestWaitInParallel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, s := replsession.New(ctx)
	var barrier sync.WaitGroup
	errA, errC := errors.New("a not confirmed"), errors.New("c not confirmed")
	ps := []*pending{{err: errA, barrier: &barrier}, {barrier: &barrier}, {err: errC, barrier: &barrier}}
	barrier.Add(len(ps))
	for i, p := range ps {
		s.Join(i, func() replsession.Pending { return p })
	}
	var after error
	s.After(func(err error) { after = err })
	err := s.Wait(ctx)
	if after != err {
		t.Errorf("After func called with %v, want Wait's %v", after, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v: the Pendings were not waited for in parallel", err)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Fatalf("Wait: %v; want both errors", err)
	}
	for i, p := range ps {
		if w, _ := p.counts(); w != 1 {
			t.Errorf("pending %d waited %d times, want 1", i, w)
		}
	}
}
