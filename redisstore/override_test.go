package redisstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/validate"
)

// overrideKeyOf returns an override key of policy in the hash slot of key (newKey's), as
// KeyBuilder.OverrideKey makes one: the same {tag}.
func overrideKeyOf(policy, key string) string {
	tag := key[strings.Index(key, "{"):]
	return "rl:" + policy + ":o:" + tag
}

func setOverride(t testing.TB, s *Store, o admit.Override) {
	t.Helper()
	if err := s.SetOverride(context.Background(), o); err != nil {
		t.Fatalf("SetOverride(%+v): %v", o, err)
	}
}

func takeReq(t testing.TB, s *Store, r admit.Request) admit.Decision {
	t.Helper()
	d, err := s.Take(context.Background(), r)
	if err != nil {
		t.Fatalf("Take(%+v): %v", r, err)
	}
	return d
}

// A Request with an OverrideKey is decided under the Override stored there: its rate, and its
// Decision says so; without one, or once it is deleted, under its own Limit. A Request without an
// OverrideKey never sees it.
func TestOverrideDecides(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute},
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute, Aligned: true},
		{Algorithm: admit.SlidingWindow, Rate: 3, Period: time.Minute},
		{Algorithm: admit.SlidingLog, Rate: 3, Period: time.Minute},
		{Algorithm: admit.Concurrency, Rate: 3, Period: time.Minute},
		{Algorithm: admit.GCRA, Rate: 3, Period: time.Minute},
	} {
		for _, id := range []string{"", "req"} { // a request ID takes the general path
			t.Run(fmt.Sprintf("%v/aligned_%v/id_%q", lim.Algorithm, lim.Aligned, id), func(t *testing.T) {
				key := newKey(t)
				okey := overrideKeyOf("test", key)
				r := admit.Request{Key: key, Limit: lim, Cost: 1, OverrideKey: okey}
				next := func(i int) admit.Request {
					r := r
					if id != "" {
						r.ID = id + strconv.Itoa(i)
					}
					return r
				}
				// No Override stored: the Limit's own numbers.
				if d := takeReq(t, s, next(0)); !d.Allowed || d.Overridden || d.Limit.Rate != 3 || d.Remaining != 2 {
					t.Fatalf("without an Override: %+v; want allowed under 3, 2 left", d)
				}
				setOverride(t, s, admit.Override{Key: okey, Rate: 6, Reason: "raised"})
				// The counters stay: 1 of 6 used. A bucket's backlog stays too, a time: 20 s, two
				// emission intervals of 10 s under 6 a minute.
				used := int64(1)
				if lim.Algorithm == admit.GCRA {
					used = 2
				}
				for i := 1; i <= int(6-used); i++ {
					d := takeReq(t, s, next(i))
					if left := 6 - used - int64(i); !d.Allowed || !d.Overridden || d.Limit.Rate != 6 || d.Remaining != left {
						t.Fatalf("take %d under an Override of 6: %+v; want allowed, %d left", i, d, left)
					}
				}
				if d := takeReq(t, s, next(6)); d.Allowed || !d.Overridden || d.Limit.Rate != 6 {
					t.Fatalf("take 7 under an Override of 6: %+v; want rejected under 6", d)
				}
				// A Request without the OverrideKey decides under its own Limit.
				plain := r
				plain.OverrideKey, plain.Cost = "", 0
				if d := takeReq(t, s, plain); d.Remaining != 0 || d.Overridden || d.Limit.Rate != 3 {
					t.Fatalf("a peek without the OverrideKey: %+v; want none left under 3", d)
				}
				existed, err := s.DeleteOverride(context.Background(), okey)
				if err != nil || !existed {
					t.Fatalf("DeleteOverride: %v, %v; want true", existed, err)
				}
				if d := takeReq(t, s, next(7)); d.Allowed || d.Overridden || d.Limit.Rate != 3 {
					t.Fatalf("after DeleteOverride: %+v; want rejected under 3", d)
				}
			})
		}
	}
}

// Several policies decided together, each with its override key: each is decided under its own
// Override, if any, all-or-nothing as ever; the path of several policies and the general path (a
// request ID) agree.
func TestOverrideSeveralPolicies(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, id := range []string{"", "req"} {
		t.Run("id_"+strconv.Quote(id), func(t *testing.T) {
			slot := newKey(t)
			lims := []admit.Limit{
				{Name: "a", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute},
				{Name: "b", Algorithm: admit.GCRA, Rate: 2, Period: time.Minute},
				{Name: "c", Algorithm: admit.SlidingWindow, Rate: 10, Period: time.Minute},
			}
			rs := make([]admit.Request, len(lims))
			for i, lim := range lims {
				rs[i] = admit.Request{Key: slot + ":" + lim.Name, Limit: lim, Cost: 1, OverrideKey: overrideKeyOf(lim.Name, slot)}
			}
			setOverride(t, s, admit.Override{Key: rs[0].OverrideKey, Rate: 4})
			setOverride(t, s, admit.Override{Key: rs[1].OverrideKey, Rate: 5, Burst: 3})
			ds := make([]admit.Decision, len(rs))
			for i := range 3 {
				for j := range rs {
					if id != "" {
						rs[j].ID = id + strconv.Itoa(i)
					}
				}
				ok, err := s.TakeAll(context.Background(), rs, ds)
				if err != nil || !ok {
					t.Fatalf("TakeAll %d: %v, %v; want admitted", i, ok, err)
				}
				want := []admit.Limit{{Rate: 4}, {Rate: 5, Burst: 3}, {Rate: 10}}
				for j, d := range ds {
					if d.Overridden != (j < 2) || d.Limit.Rate != want[j].Rate || d.Limit.Burst != want[j].Burst {
						t.Fatalf("TakeAll %d: policy %d: %+v; want overridden %v, %+v", i, j, d, j < 2, want[j])
					}
				}
				if ds[0].Remaining != int64(3-i) || ds[1].Remaining != int64(2-i) {
					t.Fatalf("TakeAll %d: %+v; want %d and %d left", i, ds, 3-i, 2-i)
				}
			}
			for j := range rs {
				if id != "" {
					rs[j].ID = "last"
				}
			}
			ok, err := s.TakeAll(context.Background(), rs, ds)
			if err != nil || ok || ds[1].Allowed || !ds[0].Allowed {
				t.Fatalf("TakeAll 4: %v, %v, %+v; want rejected by the bucket of burst 3 alone", ok, err, ds)
			}
		})
	}
}

// A GCRA Override replaces the burst when it sets one; else the Limit's burst stays, or, for a
// Limit whose burst follows its rate (Burst 0), the Override's rate is the burst too.
func TestOverrideGCRABurst(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, tc := range []struct {
		limitBurst, rate, burst, wantCapacity int64
	}{
		{0, 5, 0, 5}, {0, 5, 2, 2}, {4, 6, 0, 4}, {4, 6, 9, 9},
	} {
		key := newKey(t)
		okey := overrideKeyOf("test", key)
		lim := admit.Limit{Algorithm: admit.GCRA, Rate: 3, Period: time.Minute, Burst: tc.limitBurst}
		setOverride(t, s, admit.Override{Key: okey, Rate: tc.rate, Burst: tc.burst})
		d := takeReq(t, s, admit.Request{Key: key, Limit: lim, OverrideKey: okey})
		if !d.Overridden || d.Limit.Rate != tc.rate || d.Limit.Capacity() != tc.wantCapacity || d.Remaining != tc.wantCapacity {
			t.Fatalf("%+v: a peek: %+v; want rate %d, capacity and remaining %d", tc, d, tc.rate, tc.wantCapacity)
		}
	}
}

// Under a GCRA Limit, a bucket filled under an Override's larger burst is, after the Override is
// deleted, a full bucket under the Limit's own numbers for a Request with its OverrideKey (clamped,
// nothing written), and corrupt for one without (the TAT is further ahead than its bucket holds).
func TestOverrideGCRAClamp(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, name := range []string{"lead", "expiry", "lead/id", "expiry/id"} { // an ID: the general path
		t.Run(name, func(t *testing.T) {
			key := newKey(t)
			okey := overrideKeyOf("test", key)
			lim := admit.Limit{Algorithm: admit.GCRA, Rate: 2, Period: time.Hour, Burst: 2}
			r := admit.Request{Key: key, Limit: lim, Cost: 1, OverrideKey: okey}
			setOverride(t, s, admit.Override{Key: okey, Rate: 2, Burst: 50})
			for i := range 10 {
				if strings.HasSuffix(name, "/id") {
					r.ID = "fill" + strconv.Itoa(i)
				}
				takeReq(t, s, r)
			}
			if strings.HasSuffix(name, "/id") {
				r.ID = "after"
			}
			if strings.HasPrefix(name, "expiry") { // the TAT within the bucket, its expiry not
				tat, _ := srv.Do(t, "GET", key).ToString()
				if err := srv.Do(t, "PEXPIRE", key, strconv.FormatInt(10*time.Hour.Milliseconds(), 10)).Error(); err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.ParseInt(tat, 10, 64)
				srv.Do(t, "SET", key, strconv.FormatInt(n-4*int64(time.Hour/time.Microsecond), 10), "KEEPTTL")
			}
			if _, err := s.DeleteOverride(context.Background(), okey); err != nil {
				t.Fatal(err)
			}
			before := dump(t, srv, key)
			d := takeReq(t, s, r)
			if d.Allowed || d.Overridden || d.Remaining != 0 || d.RetryAfter <= 0 {
				t.Fatalf("after the Override's deletion: %+v; want a full bucket's rejection", d)
			}
			plain := r
			plain.OverrideKey = ""
			if _, err := s.Take(context.Background(), plain); !errors.Is(err, admit.ErrCorruptState) {
				t.Fatalf("without an OverrideKey: %v; want ErrCorruptState", err)
			}
			if after := dump(t, srv, key); after != before {
				t.Fatal("the clamped read wrote the key")
			}
		})
	}
}

// Stored bytes that SetOverride never writes are corrupt state: a decision through every path (one
// policy, several, a request ID) answers ErrCorruptState and writes nothing; Override answers it too.
func TestOverrideCorrupt(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	long := strings.Repeat("x", validate.MaxReasonLen+1)
	for _, bad := range []string{
		"", "5", "5 0", "5 0 0", "05 0 0 r", "5 00 0 r", "5 0 00 r", "0 0 0 r", "-5 0 0 r", "5 -1 0 r",
		"1e3 0 0 r", "5  0 0 r", "10000000000000000 0 0 r", "5 10000000000000000 0 r", "5 0 0 " + long,
		"5 0 12345678901234567890 r", "5 0 9223372036854775808 r", "hash", "list",
	} {
		t.Run(strconv.Quote(bad), func(t *testing.T) {
			slot := newKey(t)
			okey := overrideKeyOf("test", slot)
			switch bad {
			case "hash":
				srv.Do(t, "HSET", okey, "rate", "5")
			case "list":
				srv.Do(t, "RPUSH", okey, "5 0 0 r")
			default:
				srv.Do(t, "SET", okey, bad)
			}
			if _, _, err := s.Override(context.Background(), okey); !errors.Is(err, admit.ErrCorruptState) {
				t.Fatalf("Override: %v; want ErrCorruptState", err)
			}
			lim := admit.Limit{Algorithm: admit.GCRA, Rate: 3, Period: time.Minute}
			other := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
			for _, rs := range [][]admit.Request{
				{{Key: slot + ":a", Limit: lim, Cost: 1, OverrideKey: okey}},
				{{Key: slot + ":b", Limit: other, Cost: 1}, {Key: slot + ":c", Limit: lim, Cost: 1, OverrideKey: okey}},
				{{Key: slot + ":d", Limit: lim, Cost: 1, OverrideKey: okey, ID: "x"}},
			} {
				for _, r := range rs { // a state to leave alone
					r.OverrideKey = ""
					takeReq(t, s, r)
				}
				before := make([]string, len(rs))
				for i, r := range rs {
					before[i] = dump(t, srv, r.Key)
				}
				ds := make([]admit.Decision, len(rs))
				if _, err := s.TakeAll(context.Background(), rs, ds); !errors.Is(err, admit.ErrCorruptState) {
					t.Fatalf("TakeAll of %d: %v; want ErrCorruptState", len(rs), err)
				}
				for i, r := range rs {
					if dump(t, srv, r.Key) != before[i] {
						t.Fatalf("TakeAll of %d wrote policy %d's key", len(rs), i)
					}
				}
			}
		})
	}
}

// An Override's numbers that the Request's Limit cannot take (a rate above a sliding log's largest,
// a cost above the Override's burst) make the decision fail with ErrInvalidRequest, writing nothing.
func TestOverrideInvalidForTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, tc := range []struct {
		lim  admit.Limit
		o    admit.Override
		cost int64
	}{
		{admit.Limit{Algorithm: admit.SlidingLog, Rate: 3, Period: time.Minute}, admit.Override{Rate: 1_000_000}, 1},
		{admit.Limit{Algorithm: admit.Concurrency, Rate: 3, Period: time.Minute}, admit.Override{Rate: 1_000_000}, 1},
		{admit.Limit{Algorithm: admit.FixedWindow, Rate: 9, Period: time.Minute}, admit.Override{Rate: 2}, 5},
		{admit.Limit{Algorithm: admit.GCRA, Rate: 9, Period: time.Minute}, admit.Override{Rate: 9, Burst: 2}, 5},
	} {
		for _, id := range []string{"", "x"} {
			key := newKey(t)
			tc.o.Key = overrideKeyOf("test", key)
			setOverride(t, s, tc.o)
			_, err := s.Take(context.Background(), admit.Request{Key: key, Limit: tc.lim, Cost: tc.cost, OverrideKey: tc.o.Key, ID: id})
			if !errors.Is(err, admit.ErrInvalidRequest) || !strings.Contains(err.Error(), "override") {
				t.Fatalf("%v under %+v, cost %d: %v; want ErrInvalidRequest naming the override", tc.lim, tc.o, tc.cost, err)
			}
			if n, _ := srv.Do(t, "EXISTS", key).AsInt64(); n != 0 {
				t.Fatalf("%v under %+v: the refused decision wrote the key", tc.lim, tc.o)
			}
		}
	}
}

// SetOverride, Override, DeleteOverride, Overrides and OverrideCount: what is set reads back exactly
// (Expires to the nanosecond), the listing pages in key order with a cursor, and the index follows
// sets and deletes.
func TestOverrideMethods(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	ctx := context.Background()
	policy := "p" + strings.ToLower(newKey(t)[12:24])
	var want []admit.Override
	for i := range 7 {
		o := admit.Override{Key: overrideKeyOf(policy, newKey(t)), Rate: int64(10 + i), Burst: int64(i), Reason: "ticket " + strconv.Itoa(i) + " ünïcode  two spaces"}
		if i%2 == 1 {
			o.Expires = time.Now().Add(time.Hour + time.Duration(i)*time.Nanosecond)
		}
		setOverride(t, s, o)
		want = append(want, o)
	}
	slicesSortByKey(want)
	got, ok, err := s.Override(ctx, want[3].Key)
	if err != nil || !ok || !sameOverride(got, want[3]) {
		t.Fatalf("Override: %+v, %v, %v; want %+v", got, ok, err, want[3])
	}
	for _, o := range want {
		ms, _ := srv.Do(t, "PEXPIRETIME", o.Key).AsInt64()
		wantMS := int64(-1) // no expiry
		if !o.Expires.IsZero() {
			wantMS = (o.Expires.UnixNano() + 999_999) / 1_000_000 // rounded up to the millisecond
		}
		if ms != wantMS {
			t.Fatalf("%s: PEXPIRETIME %d; want %d", o.Key, ms, wantMS)
		}
	}
	if n, err := s.OverrideCount(ctx, policy); err != nil || n != 7 {
		t.Fatalf("OverrideCount: %d, %v; want 7", n, err)
	}
	for _, n := range []int{1, 3, 7, 1000} {
		var all []admit.Override
		cursor, pages := "", 0
		for {
			page, next, err := s.Overrides(ctx, policy, cursor, n)
			if err != nil {
				t.Fatalf("Overrides(%q, %d): %v", cursor, n, err)
			}
			if len(page) > n {
				t.Fatalf("a page of %d holds %d", n, len(page))
			}
			all, pages = append(all, page...), pages+1
			if next == "" {
				break
			}
			cursor = next
		}
		if len(all) != len(want) {
			t.Fatalf("pages of %d: %d Overrides; want %d", n, len(all), len(want))
		}
		for i := range all {
			if !sameOverride(all[i], want[i]) {
				t.Fatalf("pages of %d: Override %d is %+v; want %+v", n, i, all[i], want[i])
			}
		}
	}
	// A replaced Override replaces; a deleted one is gone from everything.
	replaced := want[0]
	replaced.Rate, replaced.Expires, replaced.Reason = 99, time.Time{}, ""
	setOverride(t, s, replaced)
	if got, _, _ := s.Override(ctx, replaced.Key); !sameOverride(got, replaced) {
		t.Fatalf("after replacing: %+v; want %+v", got, replaced)
	}
	for i, wantExisted := range []bool{true, false} {
		if existed, err := s.DeleteOverride(ctx, want[1].Key); err != nil || existed != wantExisted {
			t.Fatalf("DeleteOverride %d: %v, %v; want %v", i, existed, err, wantExisted)
		}
	}
	if _, ok, err := s.Override(ctx, want[1].Key); ok || err != nil {
		t.Fatalf("a deleted Override: %v, %v", ok, err)
	}
	if n, _ := s.OverrideCount(ctx, policy); n != 6 {
		t.Fatalf("OverrideCount after a delete: %d; want 6", n)
	}
	if page, next, err := s.Overrides(ctx, "nobody", "", 10); err != nil || len(page) != 0 || next != "" {
		t.Fatalf("Overrides of a policy without any: %v, %q, %v", page, next, err)
	}
}

func sameOverride(a, b admit.Override) bool {
	return a.Key == b.Key && a.Rate == b.Rate && a.Burst == b.Burst && a.Reason == b.Reason && a.Expires.Equal(b.Expires)
}

func slicesSortByKey(os []admit.Override) {
	for i := range os {
		for j := i + 1; j < len(os); j++ {
			if os[j].Key < os[i].Key {
				os[i], os[j] = os[j], os[i]
			}
		}
	}
}

// An expired Override is gone: its key expires by itself (PEXPIREAT), a decision is the Limit's
// own, Override reads none, and a listing skips its index entry and takes it out, a short page
// still giving the next cursor while entries follow.
func TestOverrideExpiry(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	ctx := context.Background()
	policy := "e" + strings.ToLower(newKey(t)[12:24])
	var keys []string
	for range 4 {
		keys = append(keys, overrideKeyOf(policy, newKey(t)))
	}
	slicesSortStrings(keys)
	expires := time.Now().Add(300 * time.Millisecond)
	for i, k := range keys {
		o := admit.Override{Key: k, Rate: 7}
		if i < 2 {
			o.Expires = expires
		}
		setOverride(t, s, o)
	}
	waitGone(t, srv, keys[0], keys[1])
	key := keys[0][strings.Index(keys[0], "{"):]
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	if d := takeReq(t, s, admit.Request{Key: "rl:test:" + key, Limit: lim, Cost: 1, OverrideKey: keys[0]}); d.Overridden || d.Limit.Rate != 3 {
		t.Fatalf("after the Override expired: %+v; want decided under 3", d)
	}
	if _, ok, err := s.Override(ctx, keys[0]); ok || err != nil {
		t.Fatalf("Override after its expiry: %v, %v; want none", ok, err)
	}
	if n, _ := s.OverrideCount(ctx, policy); n != 4 {
		t.Fatalf("OverrideCount before a listing tidied: %d; want 4 (expired ones counted until then)", n)
	}
	page, next, err := s.Overrides(ctx, policy, "", 2)
	if err != nil || len(page) != 0 || next != keys[1] {
		t.Fatalf("the first page of 2: %+v, %q, %v; want empty, cursor %q", page, next, err, keys[1])
	}
	page, next, err = s.Overrides(ctx, policy, next, 2)
	if err != nil || len(page) != 2 || page[0].Key != keys[2] || next != keys[3] {
		t.Fatalf("the second page: %+v, %q, %v", page, next, err)
	}
	if page, next, err = s.Overrides(ctx, policy, next, 2); err != nil || len(page) != 0 || next != "" {
		t.Fatalf("past the last: %+v, %q, %v", page, next, err)
	}
	if n, _ := s.OverrideCount(ctx, policy); n != 2 {
		t.Fatalf("OverrideCount after a listing tidied: %d; want 2", n)
	}
}

func slicesSortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// waitGone waits, patiently, until Redis has expired keys.
func waitGone(t *testing.T, srv *redistest.Server, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range keys {
		for {
			n, err := srv.Do(t, "EXISTS", k).AsInt64()
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has not expired", k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A listing puts back an index entry it found gone when a SetOverride stored the key meanwhile.
func TestOverrideTidyKeepsANewOverride(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	ctx := context.Background()
	policy := "t" + strings.ToLower(newKey(t)[12:24])
	okey := overrideKeyOf(policy, newKey(t))
	index := overrideIndex(policy)
	srv.Do(t, "ZADD", index, "0", okey)
	srv.Do(t, "SET", okey, "5 0 0 r")
	c, err := s.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tidy(ctx, c, index, []string{okey}); err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Do(t, "ZSCORE", index, okey).ToString(); n != "0" {
		t.Fatalf("the index lost %s, whose key is stored", okey)
	}
}

// SetOverride and DeleteOverride publish the key on ResetChannel: another Store's OnReset
// listener hears it, and this Store's own listeners are called.
func TestOverridePublishes(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openPatient(t, srv.URL()), openPatient(t, srv.URL())
	var mu sync.Mutex
	var heardA, heardB []string
	a.OnReset(func(keys []string) { mu.Lock(); heardA = append(heardA, keys...); mu.Unlock() })
	b.OnReset(func(keys []string) { mu.Lock(); heardB = append(heardB, keys...); mu.Unlock() })
	waitSubscribed(t, b)
	okey := overrideKeyOf("test", newKey(t))
	setOverride(t, a, admit.Override{Key: okey, Rate: 5})
	if _, err := a.DeleteOverride(context.Background(), okey); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		nb := len(heardB)
		mu.Unlock()
		if nb >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heardB) != 2 || heardB[0] != okey || heardB[1] != okey {
		t.Fatalf("the other Store heard %q; want the override key twice", heardB)
	}
	if len(heardA) < 2 || heardA[0] != okey {
		t.Fatalf("the Store's own listener heard %q; want the override key (at least twice: its own call and the channel)", heardA)
	}
}

func waitSubscribed(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.resets.subscribed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Store never subscribed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Bad input is refused before any I/O (a Store on a closed port answers ErrInvalidRequest, not
// ErrUnavailable); with Redis down every method answers ErrUnavailable.
func TestOverrideInvalidAndUnavailable(t *testing.T) {
	s, err := New(Config{URL: "redis://" + redistest.ClosedPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	good := "rl:p:o:{abc}"
	for name, err := range map[string]error{
		"SetOverride no key":      s.SetOverride(ctx, admit.Override{Rate: 1}),
		"SetOverride a state key": s.SetOverride(ctx, admit.Override{Key: "rl:p:v1-f1m:{abc}", Rate: 1}),
		"SetOverride rate 0":      s.SetOverride(ctx, admit.Override{Key: good}),
		"SetOverride burst -1":    s.SetOverride(ctx, admit.Override{Key: good, Rate: 1, Burst: -1}),
		"SetOverride past":        s.SetOverride(ctx, admit.Override{Key: good, Rate: 1, Expires: time.Now().Add(-time.Second)}),
		"SetOverride long reason": s.SetOverride(ctx, admit.Override{Key: good, Rate: 1, Reason: strings.Repeat("r", 201)}),
		"Override":                third(s.Override(ctx, "rl:p:{abc}")),
		"DeleteOverride":          second(s.DeleteOverride(ctx, "")),
		"Overrides n 0":           third(s.Overrides(ctx, "p", "", 0)),
		"Overrides n 1001":        third(s.Overrides(ctx, "p", "", 1001)),
		"Overrides cursor":        third(s.Overrides(ctx, "p", "rl:q:o:{abc}", 5)),
		"Overrides policy":        third(s.Overrides(ctx, "a:b", "", 5)),
		"OverrideCount":           second(s.OverrideCount(ctx, "")),
	} {
		if !errors.Is(err, admit.ErrInvalidRequest) {
			t.Errorf("%s: %v; want ErrInvalidRequest", name, err)
		}
	}
	for name, err := range map[string]error{
		"SetOverride":    s.SetOverride(ctx, admit.Override{Key: good, Rate: 1}),
		"Override":       third(s.Override(ctx, good)),
		"DeleteOverride": second(s.DeleteOverride(ctx, good)),
		"Overrides":      third(s.Overrides(ctx, "p", "", 5)),
		"OverrideCount":  second(s.OverrideCount(ctx, "p")),
	} {
		if !errors.Is(err, admit.ErrUnavailable) {
			t.Errorf("%s with Redis down: %v; want ErrUnavailable", name, err)
		}
	}
}

func second[A, B any](_ A, b B) B { return b }

func third[A, B, C any](_ A, b B, c C) C {
	_ = b
	return c
}

// On a Redis Cluster an override key made by KeyBuilder.OverrideKey is in the hash slot of the
// subject's state keys, so the script reads it in the same call, wherever the slot is; the indexes
// of the policies live in slots of their own, and the methods work across them.
func TestOverrideCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openPatient(t, c.URL())
	ctx := context.Background()
	kb, err := admit.NewKeyBuilder([]byte("a secret of the test, long enough"))
	if err != nil {
		t.Fatal(err)
	}
	lims := []admit.Limit{
		{Name: "cla", Algorithm: admit.FixedWindow, Rate: 2, Period: time.Minute},
		{Name: "clb", Algorithm: admit.GCRA, Rate: 2, Period: time.Minute},
	}
	masters := map[string]bool{}
	for i := range 12 {
		subject := admit.Subject{ID: newKey(t) + strconv.Itoa(i)}
		rs := make([]admit.Request, len(lims))
		for j, lim := range lims {
			key, err := kb.Key(lim, "v1", subject)
			if err != nil {
				t.Fatal(err)
			}
			okey, err := kb.OverrideKey(lim.Name, subject)
			if err != nil {
				t.Fatal(err)
			}
			if c.Slot(t, okey) != c.Slot(t, key) {
				t.Fatalf("override key %s in slot %d, its state key %s in %d", okey, c.Slot(t, okey), key, c.Slot(t, key))
			}
			rs[j] = admit.Request{Key: key, Limit: lim, Cost: 1, OverrideKey: okey}
			setOverride(t, s, admit.Override{Key: okey, Rate: 5, Reason: "cluster"})
		}
		masters[c.MasterOfKey(t, rs[0].Key).Addr()] = true
		ds := make([]admit.Decision, len(rs))
		for n := range 5 {
			ok, err := s.TakeAll(ctx, rs, ds)
			if err != nil || !ok || !ds[0].Overridden || !ds[1].Overridden || ds[0].Remaining != int64(4-n) {
				t.Fatalf("subject %d, TakeAll %d: %v, %v, %+v; want admitted under 5", i, n, ok, err, ds)
			}
		}
		if d := takeReq(t, s, rs[0]); d.Allowed {
			t.Fatalf("subject %d: the sixth: %+v; want rejected", i, d)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("the subjects' slots are on %d masters; want several", len(masters))
	}
	for _, lim := range lims {
		if n, err := s.OverrideCount(ctx, lim.Name); err != nil || n < 12 {
			t.Fatalf("OverrideCount(%s): %d, %v; want at least 12", lim.Name, n, err)
		}
		page, next, err := s.Overrides(ctx, lim.Name, "", validate.MaxOverridePage)
		if err != nil || len(page) < 12 || next != "" {
			t.Fatalf("Overrides(%s): %d, %q, %v", lim.Name, len(page), next, err)
		}
		for _, o := range page {
			if existed, err := s.DeleteOverride(ctx, o.Key); err != nil || !existed {
				t.Fatalf("DeleteOverride(%s): %v, %v", o.Key, existed, err)
			}
		}
	}
}

// parseTake reads the triples an overridden policy adds to the reply, and refuses what the script
// never sends: an override of a Request without an OverrideKey, of a policy out of range or out of
// order, numbers out of range, a reply of the wrong length, a remaining beyond the override's.
func TestOverrideReplyParsing(t *testing.T) {
	srv := redistest.Start(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute}
	with := admit.Request{Key: "rl:t:{a}", Limit: lim, Cost: 1, OverrideKey: "rl:t:o:{a}"}
	without := with
	without.OverrideKey = ""
	with2 := admit.Request{Key: "rl:u:{a}", Limit: lim, Cost: 1, OverrideKey: "rl:u:o:{a}"}
	for _, tc := range []struct {
		reply string
		rs    []admit.Request
		ok    bool
	}{
		{"1,0,1,5,0,5,0,1,6,0", []admit.Request{with}, true},
		{"1,0,1,2,0,5,0", []admit.Request{with}, true},
		{"1,0,1,5,0,5,0,1,6,0", []admit.Request{without}, false},
		{"1,0,1,2,0,5,0,2,6,0", []admit.Request{with}, false},
		{"1,0,1,2,0,5,0,0,6,0", []admit.Request{with}, false},
		{"1,0,1,2,0,5,0,1,0,0", []admit.Request{with}, false},
		{"1,0,1,2,0,5,0,1,6,-1", []admit.Request{with}, false},
		{"1,0,1,2,0,5,0,1,6", []admit.Request{with}, false},
		{"1,0,1,2,0,5,0,1,6,0,1,6,0", []admit.Request{with}, false},
		{"1,0,1,5,0,5,0,1,4,0", []admit.Request{with}, false},
		{"1,0,1,5,0,5,0,1,6,0", []admit.Request{with}, true},
		{"1,0,1,2,0,5,0,1,2,0,5,0,2,6,0,1,6,0", []admit.Request{with, with2}, false},
		{"1,0,1,2,0,5,0,1,2,0,5,0,1,6,0,2,6,0", []admit.Request{with, with2}, true},
		{"1,0,1,2,0,5,0,1,2,0,5,0,1,6,0,1,6,0", []admit.Request{with, with2}, false},
	} {
		msg, err := srv.Do(t, "EVAL", "return {"+tc.reply+"}", "0").ToMessage()
		if err != nil {
			t.Fatal(err)
		}
		ds := make([]admit.Decision, len(tc.rs))
		_, err = parseTake(msg, tc.rs, ds, make([]uint64, len(tc.rs)))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, admit.ErrUnavailable) {
			t.Fatalf("reply {%s} for %d requests: %v; want ok %v", tc.reply, len(tc.rs), err, tc.ok)
		}
		if overridden := strings.Count(tc.reply, ",") > 6; tc.ok && (ds[0].Overridden != overridden || overridden && ds[0].Limit.Rate != 6) {
			t.Fatalf("reply {%s}: %+v; want overridden under 6", tc.reply, ds[0])
		}
	}
}

// As a user with ACLRules alone (no ResetACLRules), every override method works but the
// publication: SetOverride and DeleteOverride store and delete, then answer ErrPermission saying so.
func TestOverrideLeastPrivilege(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, setUser(t, srv, "nopublish", ACLRules()))
	ctx := context.Background()
	okey := overrideKeyOf("acl", newKey(t))
	err := s.SetOverride(ctx, admit.Override{Key: okey, Rate: 5})
	if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "stored and listed") || !strings.Contains(err.Error(), ResetACLRules) {
		t.Fatalf("SetOverride without +publish: %v; want ErrPermission after storing, naming %s", err, ResetACLRules)
	}
	other := openPatient(t, setUser(t, srv, "otherkeys", strings.Replace(ACLRules(), "~rl:*", "~other:*", 1)+" "+ResetACLRules))
	if err := other.SetOverride(ctx, admit.Override{Key: okey, Rate: 6}); !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "key pattern") {
		t.Fatalf("SetOverride as a user of other keys: %v; want ErrPermission naming the key pattern", err)
	}
	if o, ok, err := s.Override(ctx, okey); err != nil || !ok || o.Rate != 5 {
		t.Fatalf("Override: %+v, %v, %v", o, ok, err)
	}
	d, err := s.Take(ctx, admit.Request{Key: "rl:acl:" + okey[strings.Index(okey, "{"):], Limit: threePerMinute, Cost: 1, OverrideKey: okey})
	if err != nil || !d.Overridden {
		t.Fatalf("Take: %+v, %v; want overridden", d, err)
	}
	if page, _, err := s.Overrides(ctx, "acl", "", 10); err != nil || len(page) != 1 {
		t.Fatalf("Overrides: %v, %v", page, err)
	}
	if n, err := s.OverrideCount(ctx, "acl"); err != nil || n != 1 {
		t.Fatalf("OverrideCount: %d, %v", n, err)
	}
	existed, err := s.DeleteOverride(ctx, okey)
	if !existed || !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("DeleteOverride without +publish: %v, %v; want deleted, then ErrPermission", existed, err)
	}
}

// A retry of a request admitted under an Override, after the Override is deleted, replays the
// recorded Decision cut to the Limit now in force, not an error.
func TestOverrideReplayAfterDelete(t *testing.T) {
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	for _, lim := range []admit.Limit{
		{Algorithm: admit.FixedWindow, Rate: 3, Period: time.Minute},
		{Algorithm: admit.GCRA, Rate: 3, Period: time.Minute},
	} {
		key := newKey(t)
		okey := overrideKeyOf("test", key)
		setOverride(t, s, admit.Override{Key: okey, Rate: 10, Burst: 10})
		r := admit.Request{Key: key, Limit: lim, Cost: 1, ID: "retried", OverrideKey: okey}
		if d := takeReq(t, s, r); !d.Allowed || d.Remaining != 9 {
			t.Fatalf("%v: under the Override: %+v; want 9 left", lim, d)
		}
		if _, err := s.DeleteOverride(context.Background(), okey); err != nil {
			t.Fatal(err)
		}
		d := takeReq(t, s, r)
		if !d.Replayed || d.Overridden || d.Remaining != 3 || d.ResetAfter > lim.MaxWait() {
			t.Fatalf("%v: the retry after the deletion: %+v; want replayed, cut to 3 left", lim, d)
		}
	}
}

// Building a take's keys and arguments allocates nothing for override keys: one Request, or several
// with the same flags (what admit.Requests makes), get a mask made once.
func TestOverrideArgsAllocateNothing(t *testing.T) {
	lim := admit.Limit{Algorithm: admit.GCRA, Rate: 5, Period: time.Minute}
	one := []admit.Request{{Key: "rl:a:v1:{s}", Limit: lim, Cost: 1, OverrideKey: "rl:a:o:{s}"}}
	three := []admit.Request{one[0], one[0], one[0]}
	three[1].Key, three[1].OverrideKey = "rl:b:v1:{s}", "rl:b:o:{s}"
	three[2].Key, three[2].OverrideKey = "rl:c:v1:{s}", "rl:c:o:{s}"
	src := algo.NewTokenSource()
	for _, rs := range [][]admit.Request{one, three} {
		var tokens [3]uint64
		var keys [7]string
		var args [3 + 3*takeArgsPerPolicy]string
		var gotKeys, gotArgs []string
		if n := testing.AllocsPerRun(100, func() {
			gotKeys, gotArgs = appendTakeArgs(keys[:0], args[:0], rs, src, tokens[:len(rs)])
		}); n != 0 {
			t.Errorf("%d policies: %v allocations", len(rs), n)
		}
		if len(gotKeys) != 2*len(rs) || gotKeys[len(rs)] != rs[0].OverrideKey || gotArgs[2] != "6" {
			t.Errorf("%d policies: keys %q, args %q; want the override keys after the policies', mask 6", len(rs), gotKeys, gotArgs)
		}
	}
}

// commandStats returns srv's calls of each command (INFO commandstats): "evalsha", "get", …
func commandStats(t testing.TB, srv *redistest.Server) map[string]int64 {
	t.Helper()
	info, err := srv.Do(t, "INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		calls[name] = n
	}
	return calls
}

// monitor starts a MONITOR of srv and returns a function that ends it and returns the commands
// clients sent meanwhile, each as its words, unquoted, the command's in upper case, leaving out
// those scripts ran (which INFO commandstats counts alike: a script's GET is a GET).
func monitor(t *testing.T, srv *redistest.Server) (stop func() [][]string) {
	t.Helper()
	srv.Do(t, "PING") // the client of the end marker connected, before the MONITOR
	conn, err := net.DialTimeout("tcp", srv.Addr(), patientCommandTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	in := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := in.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	var b [8]byte
	rand.Read(b[:])
	marker := fmt.Sprintf("end-of-monitor-%x", b)
	type result struct {
		cmds [][]string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				r.err = err
				break
			}
			if strings.Contains(line, marker) {
				break
			}
			_, rest, _ := strings.Cut(line, " [")
			source, rest, _ := strings.Cut(rest, "] ")
			if strings.HasSuffix(source, " lua") {
				continue // run by a script
			}
			words := strings.Fields(rest)
			for i, w := range words {
				words[i] = strings.Trim(w, `"`)
			}
			if len(words) > 0 {
				words[0] = strings.ToUpper(words[0])
				r.cmds = append(r.cmds, words)
			}
		}
		done <- r
	}()
	return func() [][]string {
		t.Helper()
		srv.Do(t, "ECHO", marker)
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("MONITOR: %v", r.err)
			}
			return r.cmds
		case <-time.After(time.Minute):
			t.Fatal("MONITOR: the end marker did not come within a minute")
			return nil
		}
	}
}

// A decision under an Override is one script call, as one without: INFO commandstats counts
// exactly one EVALSHA per Take (and per TakeAll of several policies) and no EVAL, and MONITOR sees
// no other command from a client — no GET of the Override — for every algorithm, on the straight
// path and the general one (a request ID), with coalescing on and off.
func TestOverrideOneScriptCall(t *testing.T) {
	srv := redistest.Start(t)
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalesce_%v", coalesce), func(t *testing.T) {
			cfg := Config{URL: srv.URL(), CommandTimeout: patientCommandTimeout, DialTimeout: patientCommandTimeout}
			if !coalesce {
				cfg.Coalescing = CoalescingOff
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			slot := newKey(t)
			var rs []admit.Request
			for i, lim := range []admit.Limit{
				{Name: "fw", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute},
				{Name: "al", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute, Aligned: true},
				{Name: "sw", Algorithm: admit.SlidingWindow, Rate: 100, Period: time.Minute},
				{Name: "sl", Algorithm: admit.SlidingLog, Rate: 100, Period: time.Minute},
				{Name: "cc", Algorithm: admit.Concurrency, Rate: 100, Period: time.Minute},
				{Name: "gc", Algorithm: admit.GCRA, Rate: 100, Period: time.Minute},
			} {
				r := admit.Request{Key: fmt.Sprintf("%s:%d", slot, i), Limit: lim, Cost: 1, OverrideKey: overrideKeyOf(lim.Name, slot)}
				setOverride(t, s, admit.Override{Key: r.OverrideKey, Rate: 50, Reason: "one call"})
				rs = append(rs, r)
			}
			takeReq(t, s, rs[0]) // the script loaded (a first NOSCRIPT), outside the count
			before := commandStats(t, srv)
			stop := monitor(t, srv)
			calls := 0
			for _, id := range []string{"", "req"} {
				for i, r := range rs {
					if id != "" {
						r.ID = fmt.Sprintf("%s-%d", id, i)
					}
					if d := takeReq(t, s, r); !d.Allowed || !d.Overridden || d.Limit.Rate != 50 {
						t.Fatalf("Take(%+v) = %+v; want admitted under the Override's 50", r, d)
					}
					calls++
				}
				all := slices.Clone(rs[:3])
				for i := range all {
					if id != "" {
						all[i].ID = id + "-all"
					}
				}
				ds := make([]admit.Decision, len(all))
				if ok, err := s.TakeAll(context.Background(), all, ds); err != nil || !ok || !ds[0].Overridden || !ds[1].Overridden || !ds[2].Overridden {
					t.Fatalf("TakeAll of 3 policies: %v, %v, %+v; want admitted, each under its Override", ok, err, ds)
				}
				calls++
			}
			sent := stop()
			after := commandStats(t, srv)
			if got := after["evalsha"] - before["evalsha"]; got != int64(calls) {
				t.Errorf("%d EVALSHA calls for %d decisions under Overrides; want exactly one each", got, calls)
			}
			if got := after["eval"] - before["eval"]; got != 0 {
				t.Errorf("%d EVAL calls beside the decisions' EVALSHAs; want none", got)
			}
			evalshas := 0
			for _, cmd := range sent {
				switch cmd[0] {
				case "EVALSHA":
					evalshas++
				case "PING": // a connection's health check
				default:
					t.Errorf("a client sent %q beside the decisions' EVALSHAs; want nothing else", cmd)
				}
			}
			if evalshas != calls {
				t.Errorf("MONITOR saw %d EVALSHAs from clients for %d decisions; want one each", evalshas, calls)
			}
		})
	}
}

// A policy with 100,000 Overrides lists in pages: every page at most n, every Override seen exactly
// once, in key order, the last cursor "". A page reads its part of the index and no more: one
// ZRANGE BYLEX with LIMIT 0 n, and one GET per member it returned (MONITOR), nothing else.
func TestOverridesOfManyListInPages(t *testing.T) {
	const many, n = 100_000, validate.MaxOverridePage
	srv := redistest.Start(t)
	s := openPatient(t, srv.URL())
	keys, err := admit.NewKeyBuilder([]byte("paging test secret of 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]bool, many)
	for i := range many {
		key, err := keys.OverrideKey("p", admit.Subject{ID: fmt.Sprint("subject-", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[key] = true
	}
	// Set through the Store's own SetOverride, from 32 goroutines: rueidis pipelines their commands.
	work := make(chan string)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for key := range work {
				if err := s.SetOverride(context.Background(), admit.Override{Key: key, Rate: 9, Reason: "paging"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for key := range want {
		work <- key
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if count, err := s.OverrideCount(context.Background(), "p"); err != nil || count != many {
		t.Fatalf("OverrideCount = %d, %v; want %d", count, err, many)
	}

	stop := monitor(t, srv)
	seen, pages, cursor, last := 0, 0, "", ""
	for {
		page, next, err := s.Overrides(context.Background(), "p", cursor, n)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if len(page) > n || len(page) < n && next != "" {
			t.Fatalf("page %d of %d Overrides, next %q; want %d, or fewer on the last", pages, len(page), next, n)
		}
		for _, o := range page {
			if !want[o.Key] || o.Key <= last || o.Rate != 9 || o.Reason != "paging" {
				t.Fatalf("page %d: %+v: not stored so, seen twice or out of order (after %q)", pages, o, last)
			}
			last = o.Key
			seen++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	sent := stop()
	// The last page is empty: a full page cannot tell whether a member follows it.
	if seen != many || pages != many/n+1 {
		t.Errorf("%d Overrides in %d pages; want %d in %d", seen, pages, many, many/n+1)
	}
	ranges, gets := 0, 0
	for _, cmd := range sent {
		switch cmd[0] {
		case "ZRANGE":
			ranges++
			if i := slices.Index(cmd, "LIMIT"); i < 0 || i+2 >= len(cmd) || cmd[i+1] != "0" || cmd[i+2] != strconv.Itoa(n) {
				t.Errorf("the listing sent %q; want a ZRANGE of LIMIT 0 %d", cmd, n)
			}
		case "GET":
			gets++
		case "PING":
		default:
			t.Errorf("the listing sent %q; want ZRANGEs and GETs only", cmd)
		}
	}
	if ranges != pages || gets != many {
		t.Errorf("the listing sent %d ZRANGEs and %d GETs for %d pages of %d Overrides; want one a page and one an Override", ranges, gets, pages, many)
	}
}
