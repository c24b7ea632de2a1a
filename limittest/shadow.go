package limittest

import (
	"testing"

	"github.com/admit-dev/admit"
)

// The cases of shadow mode (docs/http.md, "Shadow mode"): a policy in shadow mode is decided and counted as usual,
// but its rejection rejects nothing, and writes nothing.

// testShadowRejectsNothing decides an enforced policy with room, a shadow policy that fills at once,
// and a shadow policy with room, together.
func testShadowRejectsNothing(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(5, 1, 10)
	lims[1].Shadow, lims[2].Shadow = true, true
	allowed, ds := takeAll(t, s, requests(lims, keys, 1, ""))
	if !allowed || !ds[0].Allowed || !ds[1].Allowed || !ds[2].Allowed {
		t.Fatalf("first take: %v %+v; want every policy to admit", allowed, ds)
	}
	allowed, ds = takeAll(t, s, requests(lims, keys, 1, ""))
	switch {
	case !allowed:
		t.Fatalf("second take: rejected %+v; the only policy over its limit is in shadow mode, and rejects nothing", ds)
	case ds[1].Allowed || ds[1].RetryAfter <= 0:
		t.Fatalf("second take, the full shadow policy: %+v; want it to report that it would have limited", ds[1])
	case !ds[0].Allowed || ds[0].Remaining != 3 || !ds[2].Allowed || ds[2].Remaining != 8:
		t.Fatalf("second take: %+v; want the enforced policy and the shadow one with room to admit and count", ds)
	case ds[1].Token != 0:
		t.Fatalf("the shadow policy that would have limited holds token %d; it consumed nothing", ds[1].Token)
	}
	if i := admit.Deciding(ds); i != 0 {
		t.Errorf("Deciding = %d; want 0, the one enforced policy: a shadow policy never decides among enforced ones", i)
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{3, 0, 8}) {
		t.Fatalf("after: remaining %v; want [3 0 8]: the shadow rejection wrote nothing", got)
	}
	// The enforced policy rejects: nothing is consumed, the shadow policy with room included.
	two, twoKeys := []admit.Limit{lims[0], lims[2]}, []string{keys[0], keys[2]}
	allowed, ds = takeAll(t, s, requests(two, twoKeys, 4, ""))
	if allowed || ds[0].Allowed {
		t.Fatalf("a take of 4 with 3 left in the enforced policy: %v %+v; want rejected", allowed, ds)
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{3, 0, 8}) {
		t.Fatalf("after an enforced rejection: remaining %v; want [3 0 8]: nothing consumed anywhere", got)
	}
}

// testAllShadow decides policies that are all in shadow mode: every request is allowed, each policy
// counts what fits, and Deciding picks among them.
func testAllShadow(t *testing.T, b Backend) {
	s := b.Open(t)
	lims, keys := policies(1, 2)
	lims[0].Shadow, lims[1].Shadow = true, true
	for i, want := range [][]bool{{true, true}, {false, true}, {false, false}} {
		allowed, ds := takeAll(t, s, requests(lims, keys, 1, ""))
		if !allowed || ds[0].Allowed != want[0] || ds[1].Allowed != want[1] {
			t.Fatalf("take %d: %v %+v; want allowed, with the policies reporting %v", i, allowed, ds, want)
		}
		if d := admit.Deciding(ds); i == 1 && d != 0 {
			t.Errorf("take %d: Deciding = %d; want 0, the one that would have limited", i, d)
		}
	}
	if got := remaining(t, s, lims, keys); !equal(got, []int64{0, 0}) {
		t.Fatalf("remaining %v; want [0 0]: each counted what fitted", got)
	}
}
