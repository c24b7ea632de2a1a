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
	s.Close()
}

// Join makes one Pending per owner, on its first Join; Wait waits for each once and ends the
// session: a Join after it reports false, and a second Wait or a Close does nothing.
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
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for name, p := range map[string]*pending{"a": a1.(*pending), "b": b.(*pending)} {
		if w, r := p.counts(); w != 1 || r != 0 {
			t.Errorf("owner %s: %d Waits, %d Releases; want 1 Wait, no Release", name, w, r)
		}
	}
	if p, ok := s.Join("c", open); ok || p != nil || opened != 2 {
		t.Errorf("Join after Wait: %v, %v, %d opened; want none, false, nothing opened", p, ok, opened)
	}
}

// Close ends the session without waiting: each Pending released once, none waited for.
func TestClose(t *testing.T) {
	ctx, s := replsession.New(context.Background())
	p := &pending{}
	s.Join("a", func() replsession.Pending { return p })
	s.Close()
	s.Close()
	if err := s.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if w, r := p.counts(); w != 0 || r != 1 {
		t.Errorf("%d Waits, %d Releases; want no Wait, 1 Release", w, r)
	}
}

// Several Pendings are waited for in parallel: each Wait returns only once every other has begun
// (a hang guard of a minute fails the test if they run one after the other), and their errors
// are joined.
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
	err := s.Wait(ctx)
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
