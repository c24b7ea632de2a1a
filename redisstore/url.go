package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// urlOptions are the query options a Redis URL may carry. rueidis ignores an option it does not
// know, so a misspelt one would silently do nothing: parseURL refuses every option not listed here,
// and every value it cannot honour.
var urlOptions = []string{"addr", "client_cache", "client_name", "coalesce", "db", "dial_timeout", "master_set", "max_flush_delay", "max_retries", "protocol", "write_timeout"}

// parseURL turns a Redis URL into rueidis options, checking everything rueidis would accept and then
// get wrong at run time: a port outside 1…65535, a seed address without a port, an unknown option.
// Its errors never quote the URL, which may hold a password.
func parseURL(raw string) (rueidis.ClientOption, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: report only what is wrong with it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return rueidis.ClientOption{}, fmt.Errorf("malformed Redis URL (not shown: it may hold a password): %s", redactErr(err, raw))
	}
	if err := checkURL(u); err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("Redis URL %s: %w", RedactURL(raw), err)
	}
	opt, err := rueidis.ParseURL(raw)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("Redis URL %s: %s", RedactURL(raw), redactErr(err, raw))
	}
	if v := u.Query().Get("max_flush_delay"); v != "" { // rueidis.ParseURL does not know it; checkOption checked it
		opt.MaxFlushDelay, _ = time.ParseDuration(v)
	}
	return opt, nil
}

// checkURL reports what is wrong with u that rueidis.ParseURL would let through.
func checkURL(u *url.URL) error {
	switch u.Scheme {
	case "redis", "rediss":
		if u.Hostname() == "" {
			return errors.New("no host (want redis://host:port)")
		}
		if err := checkPort(u.Port(), true); err != nil {
			return err
		}
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			if db, err := strconv.Atoi(p); err != nil || db < 0 || strings.Contains(p, "/") {
				return fmt.Errorf("path %q: want /N, a database number", u.Path)
			}
		}
	case "unix":
		if u.Path == "" {
			return errors.New("no socket path (want unix:///path/to/redis.sock)")
		}
	default:
		return fmt.Errorf("scheme %q: want redis, rediss or unix", u.Scheme)
	}
	if u.Fragment != "" {
		return errors.New("a URL fragment (#...) means nothing here")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("malformed query: %v", err)
	}
	for name, values := range q {
		if name == "skip_verify" {
			return errors.New("option skip_verify: admit never skips TLS certificate verification")
		}
		if !slices.Contains(urlOptions, name) {
			return fmt.Errorf("unknown option %q (known: %s)", name, strings.Join(urlOptions, ", "))
		}
		if name != "addr" && len(values) > 1 {
			return fmt.Errorf("option %q given %d times", name, len(values))
		}
		if err := checkOption(u, name, values); err != nil {
			return err
		}
	}
	return nil
}

// checkOption reports what is wrong with the values of the query option name.
func checkOption(u *url.URL, name string, values []string) error {
	v := values[0]
	switch name {
	case "addr":
		if u.Scheme == "unix" {
			return errors.New("option addr needs a redis:// or rediss:// URL")
		}
		for _, a := range values {
			host, port, err := net.SplitHostPort(a)
			if err != nil || host == "" {
				return fmt.Errorf("option addr=%q: want host:port", a)
			}
			if err := checkPort(port, false); err != nil {
				return fmt.Errorf("option addr=%q: %w", a, err)
			}
		}
	case "db":
		db, err := strconv.Atoi(v)
		if err != nil || db < 0 {
			return fmt.Errorf("option db=%q: want a database number, 0 or more", v)
		}
		if p := strings.TrimPrefix(u.Path, "/"); u.Scheme != "unix" && p != "" {
			return fmt.Errorf("database given twice, as /%s and db=%s", p, v)
		}
	case "dial_timeout", "write_timeout":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("option %s=%q: want a positive duration such as 500ms", name, v)
		}
	case "max_flush_delay":
		if _, err := parseFlushDelay(v); err != nil {
			return fmt.Errorf("option max_flush_delay=%q: %w", v, err)
		}
	case "coalesce":
		if v != "on" && v != "off" {
			return fmt.Errorf("option coalesce=%q: want on or off", v)
		}
	case "protocol":
		if v != "2" && v != "3" {
			return fmt.Errorf("option protocol=%q: want 2 or 3", v)
		}
	case "client_cache":
		if v != "0" {
			return fmt.Errorf("option client_cache=%q: admit never uses client-side caching (a limiter reads nothing it could cache); only client_cache=0 is accepted", v)
		}
	case "max_retries":
		if v != "0" {
			return fmt.Errorf("option max_retries=%q: admit never retries a script call (a retry after a lost reply could count a request twice); only max_retries=0 is accepted", v)
		}
	case "master_set":
		if v == "" {
			return errors.New("option master_set is empty: want the Sentinel master name")
		}
	}
	return nil
}

// coalescingOf returns the Coalescing of cfg and its URL's coalesce option, which New has checked.
func coalescingOf(cfg Config) (Coalescing, error) {
	if cfg.Coalescing < CoalescingDefault || cfg.Coalescing > CoalescingOff {
		return 0, fmt.Errorf("redisstore: unknown Coalescing %d (want CoalescingDefault, CoalescingOn or CoalescingOff)", int(cfg.Coalescing))
	}
	mode := CoalescingDefault
	if u, err := url.Parse(cfg.URL); err == nil {
		switch u.Query().Get("coalesce") {
		case "on":
			mode = CoalescingOn
		case "off":
			mode = CoalescingOff
		}
	}
	switch {
	case cfg.Coalescing != CoalescingDefault && mode != CoalescingDefault && cfg.Coalescing != mode:
		return 0, fmt.Errorf("redisstore: coalescing given twice, %v in Config and %v in the URL", cfg.Coalescing, mode)
	case cfg.Coalescing != CoalescingDefault:
		return cfg.Coalescing, nil
	}
	return mode, nil
}

// MaxFlushDelayLimit is the longest flush delay a Store accepts (Config.MaxFlushDelay, the URL's
// max_flush_delay): the delay is added to a decision's latency whenever the connection is idle, and
// past a millisecond it costs far more latency than the Redis CPU it saves.
const MaxFlushDelayLimit = time.Millisecond

// parseFlushDelay reads a flush delay, a Go duration in 0 … MaxFlushDelayLimit.
func parseFlushDelay(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("want a Go duration such as 20us")
	}
	return d, checkFlushDelay(d)
}

// checkFlushDelay reports whether d is a flush delay in 0 … MaxFlushDelayLimit.
func checkFlushDelay(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("negative flush delay %v", d)
	case d > MaxFlushDelayLimit:
		return fmt.Errorf("flush delay %v above %v (it delays decisions; 20us to 100us is the useful range)", d, MaxFlushDelayLimit)
	}
	return nil
}

// checkPort reports whether port is a decimal number in 1…65535; an empty port is an error unless
// optional (the default, 6379, applies).
func checkPort(port string, optional bool) error {
	if port == "" {
		if optional {
			return nil
		}
		return errors.New("no port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q outside 1...65535", port)
	}
	return nil
}
