package httplimit

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
)

// Values handed out by a fieldArena stay as they were, across the ends of its blocks, whatever is
// appended to them or handed out after them.
func TestFieldArenaValuesStayPut(t *testing.T) {
	a := new(fieldArena)
	type handedOut struct {
		value []string
		want  string
	}
	var out []handedOut
	for i := range 3*arenaSlots + 1 {
		want := strings.Repeat(strconv.Itoa(i), 1+i%(arenaText/20)) // some texts span a block's end
		if i%7 == 0 {
			want = strings.Repeat("x", arenaText/4+1) // one of its own
		}
		v := a.value(a.string([]byte(want)))
		if len(v) != 1 || cap(v) != 1 {
			t.Fatalf("value %d has len %d, cap %d; want 1, 1", i, len(v), cap(v))
		}
		out = append(out, handedOut{v, want})
		if i%5 == 0 {
			_ = append(v, "appended") // a caller's Header().Add: must not reach the next value
		}
	}
	for i, o := range out {
		if len(o.value) != 1 || o.value[0] != o.want {
			t.Fatalf("value %d = %.40q; want [%.40q]", i, o.value, o.want)
		}
	}
}

// appendProblem writes what encoding/json makes of the problem details.
func TestAppendProblemIsJSON(t *testing.T) {
	type problem struct {
		Type             string   `json:"type"`
		Title            string   `json:"title"`
		Status           int      `json:"status"`
		Detail           string   `json:"detail"`
		ViolatedPolicies []string `json:"violated-policies"`
	}
	limits := []admit.Limit{
		{Name: "per-second", Algorithm: admit.FixedWindow, Rate: 1, Period: time.Second},
		{Name: "abcdefghijklmnopqrstuvwxyz_0123456789-", Algorithm: admit.GCRA, Rate: 1, Period: time.Second},
		{Name: "per_day", Algorithm: admit.SlidingWindow, Rate: 1, Period: 24 * time.Hour, Shadow: true},
	}
	for _, tc := range []struct {
		allowed []bool
		retry   int64
	}{
		{[]bool{false}, 1},
		{[]bool{true, false}, 3600},
		{[]bool{false, false, false}, 86400},
		{[]bool{false, true, false}, 999_999_999_999},
	} {
		ds := make([]admit.Decision, len(tc.allowed))
		p := problem{Type: QuotaExceededType, Title: QuotaExceededTitle, Status: 429, ViolatedPolicies: []string{},
			Detail: "Too many requests: retry after " + strconv.FormatInt(tc.retry, 10) + " s."}
		for i, ok := range tc.allowed {
			ds[i] = admit.Decision{Allowed: ok, Limit: limits[i]}
			if !ok {
				p.ViolatedPolicies = append(p.ViolatedPolicies, limits[i].Name)
			}
		}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendProblem(nil, limits, ds, tc.retry)); got != string(want)+"\n" {
			t.Errorf("appendProblem(%v, %d) = %s; want %s", tc.allowed, tc.retry, got, want)
		}
	}
}

// A text appended past the room that fieldArena.buffer gave it is in memory of its own: it
// neither overwrites what the arena handed out before nor changes what it hands out after.
func TestFieldArenaBufferOutgrown(t *testing.T) {
	a := new(fieldArena)
	want := strings.Repeat("a", arenaText/4-2)
	var before []string
	for range 4 {
		before = append(before, a.string([]byte(want))) // 8 bytes of the block left
	}
	grown := a.take(append(a.buffer(4), strings.Repeat("b", 20)...))
	next := a.string([]byte("cccc"))
	for i, s := range before {
		if s != want {
			t.Fatalf("text %d = %.10q…; want %.10q…", i, s, want)
		}
	}
	if grown != strings.Repeat("b", 20) || next != "cccc" {
		t.Fatalf("texts %q, %q; want b×20, cccc", grown, next)
	}
	if a.room != 4 {
		t.Errorf("%d bytes of room left; want 4 (the outgrown text took none)", a.room)
	}
}
