package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/redistest"
)

// testTakeScript is the take script as a test assembles it: it reads the time, in Unix
// microseconds, from its last argument instead of Redis's TIME, so that a test fixes it.
var testTakeScript = newScript("take-test", assemble(takeSrc, true))

// testBatchScript is the batch script as a test assembles it: its requests are decided at the time
// of its last argument, Unix microseconds.
var testBatchScript = newScript("batch-test", assembleBatch(true))

// takeAt is TakeAll with the time fixed at at, through testTakeScript.
func (s *Store) takeAt(ctx context.Context, rs []admit.Request, ds []admit.Decision, at time.Time) (bool, error) {
	if err := admit.ValidateAll(rs, ds); err != nil {
		return false, err
	}
	tokens := make([]uint64, len(rs))
	keys, args := takeArgs(rs, s.tokens, tokens)
	reply, err := s.run(ctx, testTakeScript, keys, append(args, strconv.FormatInt(at.UnixMicro(), 10)))
	if err != nil {
		return false, err
	}
	return parseTake(reply, rs, ds, tokens)
}

// testArgs is takeArgs with tokens from a source of its own, for tests that send the arguments
// themselves.
func testArgs(rs []admit.Request) (keys, args []string) {
	return takeArgs(rs, algo.NewTokenSource(), make([]uint64, len(rs)))
}

// Only a test assembly takes the time from its arguments: the production script refuses one
// argument more, and the test assembly decides as the production one does.
func TestClockOnlyFromATestAssembly(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	rs := []admit.Request{{Key: newKey(t), Limit: lim, Cost: 1}}
	keys, args := testArgs(rs)
	at := strconv.FormatInt(time.Now().UnixMicro(), 10)
	if _, err := s.run(context.Background(), takeScript, keys, append(args, at)); !errors.Is(err, admit.ErrInvalidRequest) {
		t.Fatalf("the production script with a time argument: %v; want ErrInvalidRequest", err)
	}
	ds := make([]admit.Decision, 1)
	if allowed, err := s.takeAt(context.Background(), rs, ds, time.Now()); err != nil || !allowed || ds[0].Remaining != 2 {
		t.Fatalf("the test assembly: %v, %v, %+v; want allowed with 2 left", allowed, err, ds[0])
	}
	if d := take(t, s, rs[0].Key, lim, 0); d.Remaining != 2 {
		t.Fatalf("the production script after the test assembly's admission: %d left; want 2 (one state)", d.Remaining)
	}
}
