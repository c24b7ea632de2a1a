package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/redistest"
)

// A bad flush delay, in the URL or in Config, is refused by New with an error that names it.
func TestBadFlushDelayIsRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "redis://h:1?max_flush_delay=soon"}, `option max_flush_delay="soon": want a Go duration`},
		{Config{URL: "redis://h:1?max_flush_delay=20"}, `option max_flush_delay="20": want a Go duration`},
		{Config{URL: "redis://h:1?max_flush_delay=-1us"}, "negative flush delay"},
		{Config{URL: "redis://h:1?max_flush_delay=2ms"}, "flush delay 2ms above 1ms"},
		{Config{URL: "redis://h:1?max_flush_delay=20us&max_flush_delay=30us"}, "given 2 times"},
		{Config{URL: "redis://h:1", MaxFlushDelay: -time.Microsecond}, "negative flush delay"},
		{Config{URL: "redis://h:1", MaxFlushDelay: time.Second}, "flush delay 1s above 1ms"},
		{Config{URL: "redis://h:1?max_flush_delay=20us", MaxFlushDelay: 100 * time.Microsecond}, "flush delay given twice"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// A flush delay from the URL or Config reaches rueidis; without either it is off.
func TestFlushDelayIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{URL: "redis://h:1"}, 0},
		{Config{URL: "redis://h:1?max_flush_delay=0"}, 0},
		{Config{URL: "redis://h:1?max_flush_delay=20us"}, 20 * time.Microsecond},
		{Config{URL: "redis://h:1", MaxFlushDelay: 100 * time.Microsecond}, 100 * time.Microsecond},
		{Config{URL: "redis://h:1?max_flush_delay=1ms", MaxFlushDelay: time.Millisecond}, time.Millisecond},
	} {
		opt, err := clientOption(tc.cfg)
		if err != nil || opt.MaxFlushDelay != tc.want {
			t.Errorf("clientOption(%+v): flush delay %v, %v; want %v", tc.cfg, opt.MaxFlushDelay, err, tc.want)
		}
	}
}

// A Store with a flush delay decides exactly as one without, from many goroutines at once.
func TestFlushDelayDecides(t *testing.T) {
	srv := redistest.Start(t)
	s, err := New(Config{URL: srv.URL() + "?max_flush_delay=100us"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key := newKey(t)
	lim := admit.Limit{Algorithm: admit.FixedWindow, Rate: 50, Period: time.Minute}
	allowed := make(chan bool, 64)
	for range 64 {
		go func() {
			d, err := s.Take(context.Background(), admit.Request{Key: key, Limit: lim, Cost: 1})
			if err != nil {
				t.Error(err)
			}
			allowed <- d.Allowed
		}()
	}
	n := 0
	for range 64 {
		if <-allowed {
			n++
		}
	}
	if n != 50 {
		t.Fatalf("%d of 64 decisions on a limit of 50 admitted, want 50", n)
	}
}

// A connection is not dropped for silence before a call's own command timeout and its late grace
// have passed: 1 s under short command timeouts, longer under longer ones; the URL's write_timeout
// wins.
func TestConnIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{URL: "redis://127.0.0.1:1"}, time.Second},
		{Config{URL: "redis://127.0.0.1:1", CommandTimeout: 800 * time.Millisecond}, time.Second},
		{Config{URL: "redis://127.0.0.1:1", CommandTimeout: 30 * time.Second}, 37500 * time.Millisecond},
		{Config{URL: "redis://127.0.0.1:1?write_timeout=2s", CommandTimeout: 30 * time.Second}, 2 * time.Second},
	} {
		opt, err := clientOption(tc.cfg)
		if err != nil || opt.ConnWriteTimeout != tc.want {
			t.Errorf("clientOption(%+v): ConnWriteTimeout %v, %v; want %v", tc.cfg, opt.ConnWriteTimeout, err, tc.want)
		}
	}
}
