package rlqs_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/admit-dev/admit/transport/rlqs"
)

// TestWarmShareSumsBelowBudget checks the warm-up's shares: whatever the number of clients, those
// of the first n sum to n/(n+1) of the budget, under it.
func TestWarmShareSumsBelowBudget(t *testing.T) {
	const budget = 6000.0
	total := 0.0
	for k := 1; k <= 100_000; k++ {
		total += rlqs.WarmShare(budget, k)
		if want := budget * float64(k) / float64(k+1); math.Abs(total-want) > 1e-6 || total >= budget {
			t.Fatalf("the first %d warm shares sum to %v, want %v, under %v", k, total, want, budget)
		}
	}
	if s := rlqs.WarmShare(budget, 0); s != 0 {
		t.Errorf("WarmShare of place 0 = %v, want 0", s)
	}
	if s := rlqs.WarmShare(-1, 1); s != 0 {
		t.Errorf("WarmShare of a negative budget = %v, want 0", s)
	}
	if w := rlqs.Warmup(5 * time.Second); w != 2500*time.Millisecond {
		t.Errorf("Warmup(5s) = %v, want half the TTL", w)
	}
}

// tokensOf returns the tokens per fill and the TTL of a response's one action.
func tokensOf(t *testing.T, resp *rlqsv3.RateLimitQuotaResponse) (uint32, time.Duration) {
	t.Helper()
	if len(resp.GetBucketAction()) != 1 {
		t.Fatalf("%v, want one action", resp)
	}
	a := resp.GetBucketAction()[0].GetQuotaAssignmentAction()
	return a.GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue(), a.GetAssignmentTimeToLive().AsDuration()
}

// TestWarmupNewFleet has ten Envoys of a new bucket report, in several orders, the hot one first,
// last and between, on a fake clock: during the warm-up every Envoy is sent its place's warm share
// (the sum under the budget), kept at its next report; at the warm-up's end each is pushed its
// proper share without a report, and those sum under the budget too.
func TestWarmupNewFleet(t *testing.T) {
	const n, hot, limit = 10, 3, 6000
	budget := limit / (1 + rlqs.Deadband)
	orders := [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, {3, 0, 1, 2, 4, 5, 6, 7, 8, 9}, {0, 1, 2, 4, 5, 6, 7, 8, 9, 3}}
	demand := func(i int) uint64 {
		if i == hot {
			return 105
		}
		return 5
	}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			in := startInstance(t, parseConfig(t, limit), &rlqs.MemoryLedger{}, clock)
			streams := make([]rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, n)
			warm := make([]uint32, n)
			for k, i := range order {
				streams[i] = dialStream(t, in)
				send(t, streams[i], "mesh", usage(apiBucket, 0, demand(i), 0))
				resp, err := streams[i].Recv()
				if err != nil {
					t.Fatal(err)
				}
				var ttl time.Duration
				warm[i], ttl = tokensOf(t, resp)
				if want := uint32(math.Floor(rlqs.WarmShare(budget, k+1))); warm[i] != want {
					t.Errorf("envoy %d, the %d-th to report: %d tokens a minute, want %d", i, k+1, warm[i], want)
				}
				if ttl != 4*time.Second {
					t.Errorf("envoy %d in the warm-up: TTL %v, want the 2.5s left rounded up, and a second", i, ttl)
				}
			}
			if s := sumTokens(warm); s > uint64(budget) {
				t.Errorf("the warm shares sum to %d, above the budget %.0f", s, budget)
			}

			// A second report a second later, in the warm-up: each keeps its warm share.
			clock.advance(time.Second)
			for i, s := range streams {
				send(t, s, "mesh", usage(apiBucket, time.Second, demand(i), 0))
				resp, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if got, ttl := tokensOf(t, resp); got != warm[i] || ttl != 3*time.Second {
					t.Errorf("envoy %d's second report in the warm-up: %d tokens, TTL %v; want its %d, TTL 3s", i, got, ttl, warm[i])
				}
			}

			// The warm-up's end: every Envoy is pushed its share of the split, unasked.
			clock.advance(rlqs.Warmup(5*time.Second) - time.Second)
			demands := map[string]float64{}
			for i := range n {
				demands[fmt.Sprint(i)] = float64(demand(i))
			}
			want := rlqs.Shares(budget, demands)
			got := make([]uint32, n)
			for i, s := range streams {
				resp, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				var ttl time.Duration
				got[i], ttl = tokensOf(t, resp)
				if w := uint32(math.Floor(want[fmt.Sprint(i)])); got[i] != w || ttl != 5*time.Second {
					t.Errorf("envoy %d at the warm-up's end: %d tokens, TTL %v; want its share %d, TTL 5s", i, got[i], ttl, w)
				}
			}
			if s := sumTokens(got); s > uint64(budget) {
				t.Errorf("the shares after the warm-up sum to %d, above the budget %.0f", s, budget)
			}
		})
	}
}

func sumTokens(xs []uint32) uint64 {
	var s uint64
	for _, x := range xs {
		s += uint64(x)
	}
	return s
}

// TestWarmupAfterLedgerReset runs a fleet of ten Envoys on two instances on one Redis, from its
// first report on, then empties Redis (FLUSHALL) under it: after every round of reports, in the
// new fleet's warm-up and in the one after the reset, the assignments the Envoys hold sum within
// the limit, and once each warm-up has ended they are the split again.
func TestWarmupAfterLedgerReset(t *testing.T) {
	srv, _, f := twoInstancesOnRedis(t)
	budget := 6000 / (1 + rlqs.Deadband)
	rounds := func(what string) {
		t.Helper()
		var sums []float64
		for range 6 {
			f.run(reportInterval, skewed(0))
			s := sum(f.rates())
			sums = append(sums, math.Round(s))
			if s > 6000 {
				t.Errorf("%s, %v in: the assignments sum to %.0f a minute, above the limit", what, f.clock.Now().Sub(f.start), s)
			}
		}
		t.Logf("%s: the assignments after each of 6 rounds sum to %v a minute", what, sums)
		// Past the warm-up (2.5s), every Envoy holds its share of the split again: most of the budget.
		if s := sums[len(sums)-1]; s < 0.95*budget {
			t.Errorf("%s, after the warm-up: the assignments sum to %.0f a minute, want the split of %.0f", what, s, budget)
		}
	}
	rounds("a new fleet")
	f.run(30*time.Second, skewed(0))
	if err := srv.Do(t, "FLUSHALL").Error(); err != nil {
		t.Fatal(err)
	}
	rounds("Redis emptied")
}

// resetLedger is a MemoryLedger that reset empties, as a Redis restarted or flushed.
type resetLedger struct {
	mu sync.Mutex
	l  *rlqs.MemoryLedger
}

func (r *resetLedger) ledger() *rlqs.MemoryLedger {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.l == nil {
		r.l = &rlqs.MemoryLedger{}
	}
	return r.l
}

func (r *resetLedger) reset() {
	r.mu.Lock()
	r.l = nil
	r.mu.Unlock()
}

func (r *resetLedger) ReportDemand(ctx context.Context, bucket, client string, demand float64, now time.Time, ttl time.Duration) (map[string]float64, time.Time, error) {
	return r.ledger().ReportDemand(ctx, bucket, client, demand, now, ttl)
}

func (r *resetLedger) LeaveDemand(ctx context.Context, bucket, client string) error {
	return r.ledger().LeaveDemand(ctx, bucket, client)
}

// TestWarmupAfterResetSendsNoMore has ten Envoys hold their shares of the split, then empties the
// ledger and has them report one at a time, the hot one first: each is sent no more than it held,
// so that after every answer, those answered and those not yet sum within the budget; at the
// warm-up's end the split is pushed again.
func TestWarmupAfterResetSendsNoMore(t *testing.T) {
	const n, limit = 10, 6000
	budget := limit / (1 + rlqs.Deadband)
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	ledger := &resetLedger{}
	in := startInstance(t, parseConfig(t, limit), ledger, clock)
	demand := func(i int) uint64 { return map[bool]uint64{true: 105, false: 5}[i == 0] }
	streams := make([]rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, n)
	for i := range streams {
		streams[i] = dialStream(t, in)
		send(t, streams[i], "mesh", usage(apiBucket, 0, demand(i), 0))
		if _, err := streams[i].Recv(); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(time.Second)
	for i, s := range streams {
		send(t, s, "mesh", usage(apiBucket, time.Second, demand(i), 0))
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(rlqs.Warmup(5*time.Second) - time.Second)
	held := make([]uint32, n)
	for i, s := range streams {
		resp, err := s.Recv() // the split, pushed at the warm-up's end
		if err != nil {
			t.Fatal(err)
		}
		held[i], _ = tokensOf(t, resp)
	}
	if s := sumTokens(held); s > uint64(budget) || s < uint64(0.95*budget) {
		t.Fatalf("the split held: %v, sum %d; want most of the budget %.0f", held, s, budget)
	}

	clock.advance(time.Second)
	ledger.reset()
	now := slices.Clone(held)
	for i, s := range streams {
		send(t, s, "mesh", usage(apiBucket, time.Second, demand(i), 0))
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		now[i], _ = tokensOf(t, resp)
		if want := min(held[i], uint32(rlqs.WarmShare(budget, i+1))); now[i] != want {
			t.Errorf("envoy %d, the %d-th to report after the reset: %d tokens; want %d, the least of its %d held and its place's warm share", i, i+1, now[i], want, held[i])
		}
		if s := sumTokens(now); s > uint64(budget) {
			t.Errorf("after envoy %d's answer, the assignments held sum to %d, above the budget %.0f: %v", i, s, budget, now)
		}
	}
	clock.advance(rlqs.Warmup(5 * time.Second))
	for i, s := range streams {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if now[i], _ = tokensOf(t, resp); now[i] != held[i] {
			t.Errorf("envoy %d at the warm-up's end after the reset: %d tokens, want the split's %d again", i, now[i], held[i])
		}
	}
}
