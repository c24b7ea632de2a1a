package memstore_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/memstore"
)

// manyOverrides is the number of Overrides of one policy the paging tests store.
const manyOverrides = 100_000

// A policy with 100,000 Overrides lists in pages: every page at most n, every Override seen
// exactly once, in key order, the last page's cursor "". A page copies what it returns and no
// more: the bytes one allocates are bounded by its n, far under what a copy of every key takes.
func TestOverridesOfManyListInPages(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	keys, err := admit.NewKeyBuilder([]byte("paging test secret of 32 bytes.."))
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]bool, manyOverrides)
	for i := range manyOverrides {
		key, err := keys.OverrideKey("p", admit.Subject{ID: fmt.Sprint("subject-", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetOverride(t.Context(), admit.Override{Key: key, Rate: int64(1 + i%1000)}); err != nil {
			t.Fatal(err)
		}
		want[key] = true
	}
	if n, err := s.OverrideCount(t.Context(), "p"); err != nil || n != manyOverrides {
		t.Fatalf("OverrideCount = %d, %v; want %d", n, err, manyOverrides)
	}
	for _, n := range []int{validate.MaxOverridePage, 7} {
		seen, cursor, pages, last := 0, "", 0, ""
		var worst uint64 // the most bytes one page allocated
		for {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			page, next, err := s.Overrides(t.Context(), "p", cursor, n)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("n=%d: page %d: %v", n, pages, err)
			}
			worst = max(worst, after.TotalAlloc-before.TotalAlloc)
			pages++
			if len(page) > n || len(page) < n && next != "" {
				t.Fatalf("n=%d: page %d of %d Overrides, next %q; want %d, or fewer on the last", n, pages, len(page), next, n)
			}
			for _, o := range page {
				if !want[o.Key] || o.Key <= last {
					t.Fatalf("n=%d: page %d: %q not stored, seen twice or out of order (after %q)", n, pages, o.Key, last)
				}
				last = o.Key
				seen++
			}
			if next == "" || n == 7 && pages == 50 {
				break
			}
			cursor = next
		}
		if n == 7 {
			if seen != 7*50 {
				t.Errorf("n=7: %d Overrides in 50 pages; want 350", seen)
			}
		} else if seen != manyOverrides || pages != manyOverrides/n {
			t.Errorf("n=%d: %d Overrides in %d pages; want %d in %d", n, seen, pages, manyOverrides, manyOverrides/n)
		}
		// A key is 52 bytes and its string header 16: a copy of every key would be 6.8 MB.
		if limit := uint64(n) * 1024; worst > limit {
			t.Errorf("n=%d: a page allocated %d bytes; want at most %d, what n Overrides take", n, worst, limit)
		}
		t.Logf("n=%d: %d pages, at most %d bytes allocated by one", n, pages, worst)
	}
}
