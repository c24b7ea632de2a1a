package redisstore

import (
	"strings"
	"testing"
	"time"
)

// Every URL that rueidis would accept and then fail on at run time, or whose options it would
// silently ignore, is refused by New, and the error never quotes the password.
func TestBadURLsAreRefused(t *testing.T) {
	const pw = "hunter2-secret"
	for _, tc := range []struct{ url, want string }{
		{"redis://u:" + pw + "@127.0.0.1:99999", "outside 1...65535"},
		{"redis://u:" + pw + "@127.0.0.1:0", "outside 1...65535"},
		{"redis://u:" + pw + "@:6379", "no host"},
		{"redis://u:" + pw + "@h:1/-1", "database number"},
		{"redis://u:" + pw + "@h:1/1/2", "database number"},
		{"redis://u:" + pw + "@h:1/1?db=2", "database given twice"},
		{"redis://u:" + pw + "@h:1?db=x", "option db"},
		{"redis://u:" + pw + "@h:1?dial_timeout=soon", "option dial_timeout"},
		{"redis://u:" + pw + "@h:1?dial_timeout=-1s", "option dial_timeout"},
		{"redis://u:" + pw + "@h:1?write_timeout=0s", "option write_timeout"},
		{"redis://u:" + pw + "@h:1?addr=h2", "want host:port"},
		{"redis://u:" + pw + "@h:1?addr=h2:70000", "outside 1...65535"},
		{"redis://u:" + pw + "@h:1?protocol=4", "option protocol"},
		{"redis://u:" + pw + "@h:1?client_cache=1", "client_cache"},
		{"redis://u:" + pw + "@h:1?max_retries=3", "never retries"},
		{"redis://u:" + pw + "@h:1?master_set=", "master_set is empty"},
		{"rediss://u:" + pw + "@h:1?skip_verify=true", "never skips TLS"},
		{"redis://u:" + pw + "@h:1?dial_timout=1s", "unknown option \"dial_timout\""},
		{"redis://u:" + pw + "@h:1?db=1&db=2", "given 2 times"},
		{"redis://u:" + pw + "@h:1#frag", "fragment"},
		{"http://u:" + pw + "@h:1", "scheme"},
		{"unix://u:" + pw + "@", "no socket path"},
		{"redis://u:" + pw + "@[::1", "malformed"},
	} {
		_, err := New(Config{URL: tc.url})
		if err == nil {
			t.Errorf("New(%q) succeeded; want an error", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v; want an error containing %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("New(%q): the error quotes the password: %v", tc.url, err)
		}
	}
}

// The URL's options are honoured: each one shows in the client's options.
func TestURLOptionsAreHonoured(t *testing.T) {
	opt, err := clientOption(Config{URL: "redis://u:pw@h:1/3?dial_timeout=750ms&write_timeout=2s&client_name=api&protocol=2&addr=h2:2&max_retries=0&client_cache=0"})
	if err != nil {
		t.Fatal(err)
	}
	if opt.Dialer.Timeout != 750*time.Millisecond || opt.ConnWriteTimeout != 2*time.Second || opt.SelectDB != 3 ||
		opt.ClientName != "api" || !opt.AlwaysRESP2 || strings.Join(opt.InitAddress, ",") != "h:1,h2:2" ||
		opt.Username != "u" || opt.Password != "pw" || !opt.DisableRetry || !opt.DisableCache {
		t.Fatalf("options not honoured: dial %v, write %v, db %d, name %q, RESP2 %v, addrs %v, user %q, retry off %v, cache off %v",
			opt.Dialer.Timeout, opt.ConnWriteTimeout, opt.SelectDB, opt.ClientName, opt.AlwaysRESP2, opt.InitAddress,
			opt.Username, opt.DisableRetry, opt.DisableCache)
	}
	opt, err = clientOption(Config{URL: "redis://h:1?master_set=mymaster"})
	if err != nil || opt.Sentinel.MasterSet != "mymaster" || opt.Dialer.Timeout != DefaultDialTimeout || opt.ConnWriteTimeout != connIdleTimeout(DefaultCommandTimeout) {
		t.Fatalf("defaults with master_set: %v, master %q, dial %v, write %v", err, opt.Sentinel.MasterSet, opt.Dialer.Timeout, opt.ConnWriteTimeout)
	}
	opt, err = clientOption(Config{URL: "unix:///run/redis.sock?db=2"})
	if err != nil || opt.SelectDB != 2 || strings.Join(opt.InitAddress, ",") != "/run/redis.sock" {
		t.Fatalf("unix socket: %v, db %d, addrs %v", err, opt.SelectDB, opt.InitAddress)
	}
	if opt, err := clientOption(Config{URL: "redis://h:1", DialTimeout: time.Second}); err != nil || opt.Dialer.Timeout != time.Second {
		t.Fatalf("Config.DialTimeout: %v, dial %v", err, opt.Dialer.Timeout)
	}
	if _, err := clientOption(Config{URL: "redis://h:1?dial_timeout=1s", DialTimeout: 2 * time.Second}); err == nil {
		t.Fatal("a dial timeout given twice, differently, was accepted")
	}
}
