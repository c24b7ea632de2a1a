package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/policy"
)

// server.top is optional: its size defaults to 100, its period to 10m, and subjects are not
// revealed unless the file says so; size 0 turns the sketches off.
func TestTopSettings(t *testing.T) {
	for _, c := range []struct {
		lines string
		want  policy.Top
	}{
		{"", policy.Top{Size: 100, Period: 10 * time.Minute}},
		{"top: {}", policy.Top{Size: 100, Period: 10 * time.Minute}},
		{"top: {size: 0}", policy.Top{Size: 0, Period: 10 * time.Minute}},
		{"top: {size: 10000, period: 24h}", policy.Top{Size: 10000, Period: 24 * time.Hour}},
		{"top: {size: 1, reveal_subjects: true, period: 1m}", policy.Top{Size: 1, RevealSubjects: true, Period: time.Minute}},
		{"top: {reveal_subjects: false}", policy.Top{Size: 100, Period: 10 * time.Minute}},
	} {
		file := "server:\n  listen: 127.0.0.1:0\n  " + c.lines + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		cfg, err := policy.Parse("top.yaml", []byte(file))
		if err != nil {
			t.Errorf("%q: %v", c.lines, err)
			continue
		}
		if cfg.Server.Top != c.want {
			t.Errorf("%q: Top = %+v, want %+v", c.lines, cfg.Server.Top, c.want)
		}
	}
	if policy.DefaultTopSize != 100 || policy.MaxTopSize != 10000 || policy.DefaultTopPeriod != 10*time.Minute ||
		policy.MinTopPeriod != time.Minute || policy.MaxTopPeriod != 24*time.Hour {
		t.Error("the bounds of server.top are not those its messages and docs give: size 0-10000 (100), period 1m-24h (10m)")
	}
	cfg, err := policy.Load("testdata/valid/everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (policy.Top{Size: 500, RevealSubjects: true, Period: 30 * time.Minute}); cfg.Server.Top != want {
		t.Errorf("everything.yaml: Top = %+v, want %+v", cfg.Server.Top, want)
	}
}

// A bad server.top value is an error naming the field; the file gives no Config.
func TestTopErrors(t *testing.T) {
	for _, c := range []struct{ lines, want string }{
		{"top: {size: 10001}", "server.top.size: 10001 is outside 0-10000"},
		{"top: {size: -1}", "server.top.size: -1 is outside 0-10000"},
		{"top: {size: many}", "server.top.size: want a whole number"},
		{"top: {period: 59s}", "server.top.period: 59s is outside 1m-24h"},
		{"top: {period: 0s}", "server.top.period: 0s is outside 1m-24h"},
		{"top: {reveal_subjects: 1}", "server.top.reveal_subjects: want true or false"},
		{"top: {sizes: 10}", "server.top.sizes: unknown field; did you mean size?"},
		{"top: 100", "server.top: want a mapping of the fields size, reveal_subjects, period"},
	} {
		file := "server:\n  " + c.lines + "\npolicies:\n  - {name: api, algorithm: fixed_window, limit: 10, window: 1s}\n"
		cfg, err := policy.Parse("top.yaml", []byte(file))
		if err == nil || cfg != nil {
			t.Errorf("%q: no error", c.lines)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want %q", c.lines, err, c.want)
		}
	}
}
