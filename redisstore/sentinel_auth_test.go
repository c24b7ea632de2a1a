package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// TestSentinelCredentials: sentinels that want a password are reached with SentinelPassword (the
// URL's credentials stay the data servers'), refused without it; credentials for sentinels with a
// URL that names none are an error.
func TestSentinelCredentials(t *testing.T) {
	for _, url := range []string{"redis://h:1", "rediss://h:1", "unix:///run/redis.sock"} {
		if _, err := New(Config{URL: url, SentinelPassword: "sentinel-pw"}); err == nil || !strings.Contains(err.Error(), "without master_set") || strings.Contains(err.Error(), "sentinel-pw") {
			t.Errorf("%s with a sentinel password: %v; want an error without the password", url, err)
		}
	}
	opt, err := clientOption(Config{URL: "redis://u:pw@h:1?master_set=m", SentinelUser: "su", SentinelPassword: "spw"})
	if err != nil || opt.Sentinel.Username != "su" || opt.Sentinel.Password != "spw" || opt.Username != "u" || opt.Password != "pw" {
		t.Fatalf("clientOption: %v, sentinels %q/%q, servers %q/%q", err, opt.Sentinel.Username, opt.Sentinel.Password, opt.Username, opt.Password)
	}

	st := redistest.StartSentinel(t)
	for _, s := range st.Sentinels() {
		if err := s.Do(t, "ACL", "SETUSER", "default", "on", ">sentinel-pw").Error(); err != nil {
			t.Fatalf("sentinel %s: ACL SETUSER: %v", s.Addr(), err)
		}
	}
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 2, Period: time.Hour}
	take := func(cfg Config) error {
		cfg.URL, cfg.CommandTimeout, cfg.DialTimeout = st.URL(), patientCommandTimeout, patientCommandTimeout
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Take(context.Background(), admit.Request{Key: newKey(t), Limit: lim, Cost: 1})
		return err
	}
	if err := take(Config{SentinelPassword: "sentinel-pw"}); err != nil {
		t.Fatalf("with the sentinels' password: %v", err)
	}
	if err := take(Config{}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("without the sentinels' password: %v; want ErrUnavailable", err)
	}
	if err := take(Config{SentinelPassword: "wrong"}); !errors.Is(err, admit.ErrUnavailable) {
		t.Fatalf("with a wrong password: %v; want ErrUnavailable", err)
	}
}
