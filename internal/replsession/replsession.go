// Package replsession carries one request's replicated writes in its context: the Stores it calls
// defer the wait for replicas their admissions need, and the request waits once, when all its
// Store calls are done (docs/running-redis.md, "Durability").
package replsession

import (
	"context"
	"errors"
	"sync"
)

// A Pending is what one Store left to wait for in a Session.
type Pending interface {
	// Wait waits for the replicas of every write the Store deferred, and gives back what it
	// holds. Its error means some write was not confirmed.
	Wait(ctx context.Context) error
	// Release gives back what the Store holds, without waiting.
	Release()
}

// A Session is the replicated writes of one request, waited for once. It is safe for concurrent
// use. A nil *Session is no session: its methods do nothing.
type Session struct {
	mu      sync.Mutex
	owners  []any
	pending []Pending
	after   []func(error)
	ended   bool
}

type contextKey struct{}

// New returns ctx carrying a new Session, and the Session.
func New(ctx context.Context) (context.Context, *Session) {
	s := new(Session)
	return context.WithValue(ctx, contextKey{}, s), s
}

// From returns the Session ctx carries, or nil.
func From(ctx context.Context) *Session {
	s, _ := ctx.Value(contextKey{}).(*Session)
	return s
}

// Join returns owner's Pending in s, made by open on its first Join. It reports false, with no
// Pending, once s ended (Wait or Abort): the caller then waits on its own.
func (s *Session) Join(owner any, open func() Pending) (Pending, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil, false
	}
	for i, o := range s.owners {
		if o == owner {
			return s.pending[i], true
		}
	}
	p := open()
	s.owners, s.pending = append(s.owners, owner), append(s.pending, p)
	return p, true
}

// After registers f, called once s ended, with the error of its Wait or its Abort: a decorator's
// count of the calls' decisions, which stand only if the wait confirms them. It reports false,
// registering nothing, once s ended.
func (s *Session) After(f func(error)) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.after = append(s.after, f)
	return true
}

// end ends s and returns its Pendings and its After funcs, each once.
func (s *Session) end() ([]Pending, []func(error)) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil, nil
	}
	s.ended = true
	return s.pending, s.after
}

// Wait ends s and waits for every Pending in it, in parallel when several, and returns their
// errors joined, which it passes to the After funcs. A Session ended before waits for nothing.
func (s *Session) Wait(ctx context.Context) error {
	ps, after := s.end()
	err := wait(ctx, ps)
	for _, f := range after {
		f(err)
	}
	return err
}

// wait waits for ps, in parallel when several, and returns their errors joined.
func wait(ctx context.Context, ps []Pending) error {
	return All(len(ps), func(i int) error { return ps[i].Wait(ctx) })
}

// All runs f(0) … f(n-1), in parallel when n is above 1, and returns their errors joined: the
// waits of a Session's Pendings, and a Pending's own waits on several servers.
func All(n int, f func(i int) error) error {
	switch n {
	case 0:
		return nil
	case 1:
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Abort ends s without waiting, because a call of its request failed with err (not nil): it
// gives back what its Pendings hold, and passes err to the After funcs. It does nothing once s
// ended.
func (s *Session) Abort(err error) {
	ps, after := s.end()
	for _, p := range ps {
		p.Release()
	}
	for _, f := range after {
		f(err)
	}
}
