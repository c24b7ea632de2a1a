package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
)

type ctxKey struct{}

// newTimeoutStore returns a Store that never connects, for the contexts it bounds calls with.
func newTimeoutStore(t *testing.T, timeout time.Duration) *Store {
	t.Helper()
	s, err := New(Config{URL: "redis://127.0.0.1:1", CommandTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitDone fails t unless ctx is done within a few seconds.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the bounded context never ended")
	}
}

// A call's context ends at the command timeout with context.DeadlineExceeded, reports its deadline,
// and carries the parent's values; a context released in time comes back unused, over and over.
func TestBoundEndsAtTheCommandTimeout(t *testing.T) {
	s := newTimeoutStore(t, 200*time.Millisecond)
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	for range 1000 { // released contexts are reused: none may carry an ended state
		before := time.Now()
		ctx, c := s.bound(parent)
		if d, ok := ctx.Deadline(); !ok || d.Before(before.Add(200*time.Millisecond)) || d.After(time.Now().Add(200*time.Millisecond)) {
			t.Fatalf("Deadline() = %v, %v; want about 200ms from now", d, ok)
		}
		if ctx.Err() != nil || ctx.Value(ctxKey{}) != "v" {
			t.Fatalf("fresh bounded context: Err %v, value %v", ctx.Err(), ctx.Value(ctxKey{}))
		}
		select {
		case <-ctx.Done():
			t.Fatal("a fresh bounded context is done already")
		default:
		}
		c.release()
	}
	s = newTimeoutStore(t, 5*time.Millisecond)
	ctx, c := s.bound(parent)
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() after the timeout = %v, want context.DeadlineExceeded", ctx.Err())
	}
	c.release()
	for range 100 { // the ended context never comes back from the pool
		ctx, c := s.bound(parent)
		if ctx.Err() != nil {
			t.Fatalf("a bounded context after an expired one: Err %v", ctx.Err())
		}
		c.release()
	}
}

// Cancelling the parent ends the call's context at once, with the parent's error.
func TestBoundFollowsTheParent(t *testing.T) {
	s := newTimeoutStore(t, time.Hour)
	parent, cancel := context.WithCancel(context.Background())
	ctx, c := s.bound(parent)
	cancel()
	waitDone(t, ctx)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err() after the parent's cancel = %v, want context.Canceled", ctx.Err())
	}
	c.release()
	parent, cancel = context.WithCancel(context.Background())
	defer cancel()
	for range 100 {
		ctx, c := s.bound(parent)
		if ctx.Err() != nil {
			t.Fatalf("a bounded context of a live parent: Err %v", ctx.Err())
		}
		c.release()
	}
}

// A parent whose deadline comes before the command timeout is used as it is.
func TestBoundKeepsAnEarlierDeadline(t *testing.T) {
	s := newTimeoutStore(t, time.Hour)
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, c := s.bound(parent)
	if ctx != parent || c != nil {
		t.Fatalf("bound(a context with an earlier deadline) = %v, %v; want the context itself", ctx, c)
	}
	c.release() // a nil callCtx releases nothing
	late, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	ctx, c = s.bound(late)
	defer c.release()
	if d, _ := ctx.Deadline(); ctx == late || d.After(time.Now().Add(time.Hour)) {
		t.Fatalf("bound(a context with a later deadline): deadline %v, want the command timeout's", d)
	}
}

// A call never ends before its deadline, even on a reused context whose timer was armed for an
// earlier call's deadline: the timer then arms itself again for the time left.
func TestBoundNeverEndsEarly(t *testing.T) {
	s := newTimeoutStore(t, 40*time.Millisecond)
	for range 5 {
		_, first := s.bound(context.Background())
		first.release() // back to the pool, its timer still armed for about 40ms from now
		time.Sleep(25 * time.Millisecond)
		ctx, c := s.bound(context.Background())
		waitDone(t, ctx)
		deadline, _ := ctx.Deadline()
		if now := time.Now(); now.Before(deadline) {
			t.Fatalf("the call ended %v before its deadline", deadline.Sub(now))
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err() = %v, want context.DeadlineExceeded", ctx.Err())
		}
		c.release()
	}
}

// A parent cancelled already gives a context done from the start — not a moment later, when
// AfterFunc's goroutine runs — so a call under it never reaches Redis (a breaker then sees the
// caller's cancellation, not a refused connection).
func TestBoundOfACancelledParentIsDoneAtOnce(t *testing.T) {
	s := newTimeoutStore(t, time.Hour)
	for range 1000 {
		parent, cancel := context.WithCancel(context.Background())
		cancel()
		ctx, c := s.bound(parent)
		select {
		case <-ctx.Done():
		default:
			t.Fatal("bound(cancelled parent): Done not closed on return")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err() = %v, want context.Canceled", ctx.Err())
		}
		c.release()
	}
}

// BenchmarkBound measures bounding one call by the command timeout and releasing it, the client
// path's own cost beside rueidis's, with a parent that cannot be cancelled (as the benchmarks call).
func BenchmarkBound(b *testing.B) {
	s, err := New(Config{URL: "redis://127.0.0.1:1", CommandTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, c := s.bound(ctx)
			c.release()
		}
	})
}

// BenchmarkReferenceBound is BenchmarkBound's reference: context.WithTimeout and its cancel, what a
// caller of bare rueidis writes for the same bound.
func BenchmarkReferenceBound(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, cancel := context.WithTimeout(ctx, time.Second)
			cancel()
		}
	})
}

// A call ended by its deadline is late (validate.ErrClientLate: the client's lateness) exactly when a reply
// reached another call of the Store since it began, or a timer of the Store (its own or another's)
// ran more than the slack past its deadline since it began; replies before it began do not count,
// and the verdict, made at the first Err, is kept.
func TestDeadlineVerdict(t *testing.T) {
	s := newTimeoutStore(t, 5*time.Millisecond)
	s.inflight.replies.Add(7) // before the calls: no evidence for them
	slack := time.Hour        // however late the timers run on a busy machine
	// Every call here ends by its deadline, and so never goes back to the pool: each is new.
	s.calls.New = func() any { return newCallCtx(&s.calls, s.epoch, s.inflight, slack, slack) }

	ctx, c := s.bound(context.Background())
	waitDone(t, ctx)
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, validate.ErrClientLate) {
		t.Fatalf("nothing answered meanwhile: Err() = %v, want context.DeadlineExceeded, not late", err)
	}
	s.inflight.replies.Add(1) // after the verdict: changes nothing
	if err := ctx.Err(); errors.Is(err, validate.ErrClientLate) {
		t.Fatalf("Err() asked again = %v, want the first verdict kept", err)
	}
	c.release()

	ctx, c = s.bound(context.Background())
	s.inflight.replies.Add(1) // another call answered
	waitDone(t, ctx)
	wantLate(t, ctx.Err(), "another call answered meanwhile")
	c.release()

	s.inflight.lateAt.Store(int64(time.Since(s.epoch))) // a timer ran late before the next call
	ctx, c = s.bound(context.Background())
	waitDone(t, ctx)
	if err := ctx.Err(); errors.Is(err, validate.ErrClientLate) {
		t.Fatalf("a timer late before the call began: Err() = %v, want not late", err)
	}
	c.release()

	ctx, c = s.bound(context.Background())
	s.inflight.lateAt.Store(int64(c.began) + 1) // another call's timer ran late since this one began
	waitDone(t, ctx)
	wantLate(t, ctx.Err(), "another timer late meanwhile")
	c.release()

	slack = -1 // any timer is later than that past its deadline
	ctx, c = s.bound(context.Background())
	waitDone(t, ctx)
	wantLate(t, ctx.Err(), "the timer past its slack")
	c.release()
}

// wantLate fails t unless err is a late client's timeout.
func wantLate(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, validate.ErrClientLate) {
		t.Fatalf("%s: Err() = %v, want one matching DeadlineExceeded and ErrClientLate", what, err)
	}
	if !errors.Is(unavailable(err), admit.ErrUnavailable) {
		t.Fatalf("unavailable(%v) does not match ErrUnavailable", err)
	}
	if errors.Is(err, validate.ErrUnavailable) {
		t.Fatalf("%v matches ErrUnavailable before the Store wraps it", err)
	}
}

// The verdict on the timer, by how far past the deadline it ran.
func TestDeadlineVerdictSlack(t *testing.T) {
	for _, tc := range []struct {
		overdue, slack time.Duration
		late           bool
	}{
		{0, time.Hour, false},
		{time.Hour, time.Hour, false},
		{time.Hour + 1, time.Hour, true},
		{3 * time.Hour, time.Hour, true},
	} {
		c := newCallCtx(nil, time.Now(), &inflight{}, tc.slack, tc.slack)
		c.overdue = tc.overdue
		c.end(deadlineExceeded)
		if got := errors.Is(c.Err(), validate.ErrClientLate); got != tc.late {
			t.Errorf("timer %v past the deadline, slack %v: late = %v, want %v", tc.overdue, tc.slack, got, tc.late)
		}
	}
	if got := lateTimerSlack(DefaultCommandTimeout); got != 20*time.Millisecond {
		t.Errorf("lateTimerSlack(%v) = %v, want 20ms", DefaultCommandTimeout, got)
	}
}

// A verdict judged later (JudgeLate) waits for its grace: a reply that reaches another call within
// it makes the client late, nothing makes Redis; until the grace ends Is reports the evidence so far
// without deciding, Error decides nothing, and the verdict, once made, is kept. Evidence at the
// call's end decides at once, with no grace.
func TestDeadlineVerdictAfterGrace(t *testing.T) {
	s := newTimeoutStore(t, 5*time.Millisecond)
	slack := time.Hour // however late the timers run on a busy machine
	s.calls.New = func() any { return newCallCtx(&s.calls, s.epoch, s.inflight, slack, slack) }
	var g graces
	s.inflight.grace = g.start

	for _, tc := range []struct {
		name       string
		inGrace    bool // a reply reaches another call within the grace
		early      bool // Is and Error are asked within the grace, before the reply
		wantLate   bool
		wantReport int
	}{
		{"nothing in the grace", false, false, false, 1},
		{"a reply in the grace", true, false, true, 1},
		{"asked early, then a reply", true, true, true, 1},
		{"asked early, nothing", false, true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := s.bound(context.Background())
			waitDone(t, ctx)
			err := ctx.Err()
			_ = err.Error() // as fmt.Errorf's %w does: decides nothing
			var reports []bool
			v, ok := err.(validate.LateVerdict)
			if !ok || !v.JudgeLate(func(late bool) { reports = append(reports, late) }) {
				t.Fatalf("no evidence at the end: JudgeLate of %v did not wait for the grace", err)
			}
			if v.JudgeLate(func(bool) { t.Error("a second JudgeLate reported") }) {
				t.Fatal("a second JudgeLate waits too")
			}
			if tc.early && errors.Is(err, validate.ErrClientLate) {
				t.Fatalf("within the grace, nothing yet: %v matches ErrClientLate", err)
			}
			if tc.inGrace {
				s.inflight.replies.Add(1)
			}
			fns := g.take()
			if len(fns) != 1 {
				t.Fatalf("%d graces started, want 1", len(fns))
			}
			fns[0]()
			if len(reports) != tc.wantReport || reports[0] != tc.wantLate {
				t.Fatalf("reports %v, want [%v]", reports, tc.wantLate)
			}
			if errors.Is(err, validate.ErrClientLate) != tc.wantLate {
				t.Fatalf("after the grace: %v matches ErrClientLate = %v, want %v", err, !tc.wantLate, tc.wantLate)
			}
			s.inflight.replies.Add(1) // after the verdict: changes nothing
			if errors.Is(err, validate.ErrClientLate) != tc.wantLate {
				t.Fatal("the verdict changed after it was made")
			}
			c.release()
		})
	}

	t.Run("evidence at the end", func(t *testing.T) {
		ctx, c := s.bound(context.Background())
		s.inflight.replies.Add(1)
		waitDone(t, ctx)
		v := ctx.Err().(validate.LateVerdict)
		if v.JudgeLate(func(bool) { t.Error("reported") }) {
			t.Fatal("JudgeLate waits for a grace with evidence already in")
		}
		wantLate(t, ctx.Err(), "a reply before the end")
		if n := len(g.take()); n != 0 {
			t.Fatalf("%d graces started, want none", n)
		}
		c.release()
	})
	if got := lateGrace(DefaultCommandTimeout); got != 50*time.Millisecond {
		t.Errorf("lateGrace(%v) = %v, want 50ms", DefaultCommandTimeout, got)
	}
}
