package algo

import (
	"testing"
	"time"
)

func TestConcurrency(t *testing.T) {
	const ttl = 10 * time.Second
	const now = 1_700_000_000_123_456
	ms := time.Millisecond
	in := func(d ...time.Duration) []Lease { // leases expiring d from now, given earliest first
		leases := make([]Lease, len(d))
		for i := range d {
			leases[i] = Lease{Token: uint64(i + 1), Expiry: now + d[i].Microseconds()}
		}
		return leases
	}
	exp := now + ttl.Microseconds()
	for _, tc := range []struct {
		name   string
		leases []Lease
		limit  int64
		n      int64
		want   ConcurrencyResult
	}{
		{"missing key", nil, 3, 1, ConcurrencyResult{WriteCreate, true, 2, 0, ttl, 0, exp}},
		{"missing key, peek", nil, 3, 0, ConcurrencyResult{Allowed: true, Remaining: 3}},
		{"adds", in(4*time.Second, 9*time.Second), 3, 1, ConcurrencyResult{WriteIncrement, true, 0, 0, ttl, 0, exp}},
		{"peek reports the last lease's end", in(4*time.Second, 9*time.Second), 3, 0,
			ConcurrencyResult{Allowed: true, Remaining: 1, ResetAfter: 9 * time.Second}},
		{"full: waits for the first to expire", in(4*time.Second, 6*time.Second, 9*time.Second), 3, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: 4 * time.Second, ResetAfter: 9 * time.Second}},
		{"expired leases do not count and are removed by an admission",
			in(-time.Second, 0, 3*time.Second), 2, 1, ConcurrencyResult{WriteIncrement, true, 0, 0, ttl, 2, exp}},
		{"a rejection removes nothing", in(-time.Second, 2*time.Second, 3*time.Second), 2, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: 2 * time.Second, ResetAfter: 3 * time.Second}},
		{"a lease expiring now has expired", in(0), 1, 1, ConcurrencyResult{WriteIncrement, true, 0, 0, ttl, 1, exp}},
		{"a lease one microsecond from its end", in(time.Microsecond), 1, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: ms, ResetAfter: ms}},
		{"live above a lowered limit waits for enough", in(time.Second, 2*time.Second, 3*time.Second), 2, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: 2 * time.Second, ResetAfter: 3 * time.Second}},
		{"live above a lowered limit: peek", in(time.Second, 2*time.Second, 3*time.Second), 2, 0,
			ConcurrencyResult{Remaining: 0, RetryAfter: time.Second, ResetAfter: 3 * time.Second}},
		{"a lease of a longer TTL is reported within this one", in(5*time.Second, time.Minute), 2, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: 5 * time.Second, ResetAfter: ttl}},
		{"sub-millisecond ends round up", in(2500 * time.Microsecond), 1, 1,
			ConcurrencyResult{Remaining: 0, RetryAfter: 3 * ms, ResetAfter: 3 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckConcurrency(tc.leases, now); err != nil {
				t.Fatalf("CheckConcurrency: %v", err)
			}
			if got := Concurrency(tc.leases, now, tc.limit, ttl, tc.n); got != tc.want {
				t.Fatalf("Concurrency(%v, %d, %v, %d)\n = %+v\nwant %+v", tc.leases, tc.limit, ttl, tc.n, got, tc.want)
			}
		})
	}
}

func TestCheckConcurrency(t *testing.T) {
	const now = 1_700_000_000_000_000
	for _, tc := range []struct {
		name   string
		leases []Lease
		want   error
	}{
		{"too many", make([]Lease, MaxLeases+1), ErrTooManyLeases},
		{"beyond MaxPeriod", []Lease{{1, now + 367*24*3600*1_000_000}}, ErrLeaseTooLong},
		{"unordered", []Lease{{1, now + 5}, {2, now + 3}}, ErrLeasesUnordered},
		{"at MaxPeriod", []Lease{{1, now + 366*24*3600*1_000_000}}, nil},
	} {
		if err := CheckConcurrency(tc.leases, now); err != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
}

func TestLeaseEdits(t *testing.T) {
	leases := AddLease(nil, 0, Lease{1, 10})
	leases = AddLease(leases, 0, Lease{2, 30})
	leases = AddLease(leases, 0, Lease{3, 20}) // a shorter TTL: kept in order
	leases = AddLease(leases, 1, Lease{4, 30}) // removes the first
	want := []Lease{{3, 20}, {2, 30}, {4, 30}}
	if len(leases) != len(want) {
		t.Fatalf("%v; want %v", leases, want)
	}
	for i := range want {
		if leases[i] != want[i] {
			t.Fatalf("%v; want %v", leases, want)
		}
	}
	leases, ok := RemoveLease(leases, 2)
	if _, again := RemoveLease(leases, 2); !ok || again || len(leases) != 2 || leases[1] != (Lease{4, 30}) {
		t.Fatalf("RemoveLease: %v, %v, %v", leases, ok, again)
	}
}

func TestTokens(t *testing.T) {
	src := NewTokenSource()
	seen := map[uint64]bool{}
	for range 1000 {
		tok := src.Next()
		if tok == 0 || seen[tok] {
			t.Fatalf("token %d: 0 or repeated", tok)
		}
		seen[tok] = true
	}
	var wrap TokenSource
	wrap.base = ^uint64(0) - 1 // the counter passes 0: skipped
	if a, b := wrap.Next(), wrap.Next(); a != ^uint64(0) || b != 1 {
		t.Fatalf("tokens around 0: %d, %d; want 2^64-1, then 1", a, b)
	}
	if RequestToken("id", "fp", 0) != RequestToken("id", "fp", 0) ||
		RequestToken("id", "fp", 0) == RequestToken("id2", "fp", 0) ||
		RequestToken("id", "fp", 0) == RequestToken("id", "fp", 1) {
		t.Fatal("RequestToken: not a function of the ID, the fingerprint and the index alone")
	}
}
