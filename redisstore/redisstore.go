// Package redisstore is an admit.Store on Redis: every decision is one Lua script, run atomically
// inside Redis with Redis's own clock, so any number of processes share one limit exactly.
//
// Scripts are called with EVALSHA; on NOSCRIPT the store loads them with SCRIPT LOAD and calls
// EVALSHA again, so a least-privilege ACL user without EVAL works. A script call is never retried
// after it may have run: a retry after a lost reply could count one request twice. Concurrent
// decisions of one process share script calls (Config.Coalescing), each decided as its own call
// would have been.
package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/replsession"
)

// Default timeouts, from the origin design: a limiter that cannot decide quickly should say so.
const (
	DefaultDialTimeout    = 200 * time.Millisecond
	DefaultCommandTimeout = 200 * time.Millisecond
)

// connIdleTimeout returns how long a connection may go without an answer from Redis (a frozen or
// black-holed server) before rueidis drops it and dials again, for the command timeout
// commandTimeout: 1 s, or longer under a longer command timeout, so that a call is never cut short
// by its connection before its own timeout and the grace of its late verdict have passed.
func connIdleTimeout(commandTimeout time.Duration) time.Duration {
	return max(time.Second, commandTimeout+lateGrace(commandTimeout))
}

// sentinelRefreshInterval is how often a Store on Sentinel asks the sentinels which server is the
// primary, besides following their +switch-master events. Without it a missed event (the connection
// to the sentinel lost during the switch) would leave the Store on a demoted primary, every decision
// failing with READONLY until the process restarts; and a forced failover names the new primary about
// a second before it publishes the event, while the old primary still accepts, and then loses, writes.
const sentinelRefreshInterval = time.Second

// lateTimerSlack returns how late past its deadline a call's timer may run (and how long one pass
// through the run queue may take) before its timeout is taken for the process's own lateness
// (guard.ErrClientLate) rather than Redis's: a tenth of the command timeout, 20 ms of the default
// 200 ms. On a host that runs the process, a timer is late by well under a millisecond.
func lateTimerSlack(commandTimeout time.Duration) time.Duration { return commandTimeout / 10 }

// lateGrace returns how long a timeout without evidence of the client's lateness waits for some
// before guard's Breaker counts it (validate.LateVerdict): a quarter of the command timeout, 50 ms
// of the default 200 ms, enough for the runtime's next network poll (at most 10 ms apart) to read
// replies a starved process left in its sockets. The caller has its error at once; only the
// Breaker's count waits, so a frozen Redis opens it that much later.
func lateGrace(commandTimeout time.Duration) time.Duration { return commandTimeout / 4 }

// Config configures a Store. Only URL is required.
type Config struct {
	// URL locates Redis:
	//   redis://[user:password@]host[:port][/db]          standalone (a cluster is detected by itself)
	//   rediss://…                                        the same over TLS
	//   unix:///path/to/redis.sock[?db=N]                 a Unix socket
	//   redis://host:port?addr=host2:port2&addr=…          several seed addresses (a cluster)
	//   redis://host:port?master_set=NAME                 Sentinel: host:port are sentinels
	// Query options, each honoured or refused, never ignored: addr, master_set, db, client_name,
	// dial_timeout and write_timeout (Go durations), max_flush_delay (a Go duration, see
	// MaxFlushDelay), coalesce (on or off, see Coalescing), protocol (2 or 3); client_cache=0 and
	// max_retries=0 are accepted because admit never caches nor retries a script, any other value
	// of them is refused; skip_verify and unknown options are refused. New reports a malformed URL
	// (a port outside 1…65535, a seed address without a port) without quoting its password.
	URL string
	// DialTimeout bounds connecting, including the handshake. 0 means the URL's dial_timeout, else
	// DefaultDialTimeout; setting both to different values is an error.
	DialTimeout time.Duration
	// CommandTimeout bounds one decision, from the call to the reply, connecting included.
	// 0 means DefaultCommandTimeout.
	CommandTimeout time.Duration
	// MaxFlushDelay, when above 0, lets each connection wait up to this long before writing the
	// commands queued on it, so that more decisions share one write and one read, and Redis spends
	// less CPU per decision on the network (rueidis.ClientOption.MaxFlushDelay). Off (0) by
	// default: it helps deployments where hundreds of goroutines of one process decide at once
	// against a busy Redis, and only adds latency to a lightly loaded one. 0 means the URL's
	// max_flush_delay, else off; at most MaxFlushDelayLimit; setting both to different values is an
	// error. docs/redis.md has the measurements.
	MaxFlushDelay time.Duration

	// TLS settings, for a rediss:// URL only: New refuses any of them with a redis:// or unix://
	// URL (neither plaintext nor TLS is ever chosen silently). A rediss:// URL without them verifies
	// the server against the system roots and the URL's host name. New reads the files at once and
	// refuses to start on one it cannot read or parse; the certificate is always verified (admit has
	// no skip-verify setting).

	// CAFile is a PEM bundle of the certificates that may sign the server's certificate, replacing
	// the system roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its private key, for a server that
	// authenticates clients (tls-auth-clients yes); set both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry, when it is not the URL's host.
	ServerName string

	// SentinelUser and SentinelPassword are what the Store logs in to the sentinels of a URL with
	// master_set as (the URL's user and password are the data servers'); both empty, it logs in
	// to them as no one. New refuses them with a URL that names no sentinels.
	SentinelUser, SentinelPassword string

	// Coalescing says whether concurrent takes of this Store share script calls: while a take is
	// in flight for its lane (the server, or on a cluster its hash slot), those that arrive are
	// gathered and sent together as one batch call when it returns, each decided exactly as its
	// own call would have been, in the batch's order. A take that finds its lane idle goes at once.
	// CoalescingDefault (the zero value) is on; the URL's coalesce=on or coalesce=off sets it too,
	// and setting both to different values is an error. docs/redis.md, "Coalescing", has the
	// measurements.
	Coalescing Coalescing
}

// A Store keeps limit state in Redis. It is safe for concurrent use. Make one with [New]; the zero
// value is not usable.
//
// A Store connects lazily: New fails only on a malformed Config, and while Redis is unreachable
// every decision fails fast with an error matching admit.ErrUnavailable. Once connected, the client
// reconnects by itself.
type Store struct {
	opt            rueidis.ClientOption
	commandTimeout time.Duration
	tokens         *algo.TokenSource // names the leases of Concurrency Limits
	inflight       *inflight         // bounds the commands in the client, see maxInFlight
	dedicated      chan struct{}     // bounds the replicated decisions in flight to the client's pool (durable.go)
	calls          sync.Pool         // of *callCtx, each bounding one call by commandTimeout
	co             *coalescer        // nil when Coalescing is off
	test           *testScripts      // tests only: the test assemblies and their time, or nil
	epoch          time.Time         // with a monotonic reading: callCtx deadlines count from it

	resets listeners // OnReset's, and the subscription that calls them

	client  atomic.Pointer[rueidis.Client]
	mu      sync.Mutex // guards dialing and closed
	dialing *dialAttempt
	closed  bool
}

var _ admit.Store = (*Store)(nil)

// A dialAttempt is one connection attempt that any number of callers may wait for.
type dialAttempt struct {
	done   chan struct{}
	client rueidis.Client
	err    error
}

// New returns a Store for cfg. It does not connect: the first decision does.
func New(cfg Config) (*Store, error) {
	opt, err := clientOption(cfg)
	if err != nil {
		return nil, err
	}
	timeout := commandTimeoutOf(cfg)
	if timeout < 0 {
		return nil, fmt.Errorf("redisstore: negative command timeout %v", timeout)
	}
	mode, err := coalescingOf(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{opt: opt, commandTimeout: timeout, tokens: algo.NewTokenSource(), inflight: newInflight(abandonedHold(opt)),
		dedicated: make(chan struct{}, rueidis.DefaultPoolSize)}
	if mode != CoalescingOff {
		s.co = &coalescer{laneCalls: laneCalls, lanes: map[uint16]*lane{}}
	}
	s.epoch = time.Now()
	s.calls.New = func() any {
		return newCallCtx(&s.calls, s.epoch, s.inflight, lateTimerSlack(timeout), lateGrace(timeout))
	}
	return s, nil
}

// commandTimeoutOf returns cfg's command timeout: DefaultCommandTimeout when it sets none.
func commandTimeoutOf(cfg Config) time.Duration {
	if cfg.CommandTimeout == 0 {
		return DefaultCommandTimeout
	}
	return cfg.CommandTimeout
}

// clientOption turns cfg into rueidis options with every automatic retry off.
func clientOption(cfg Config) (rueidis.ClientOption, error) {
	if cfg.URL == "" {
		return rueidis.ClientOption{}, errors.New("redisstore: no Redis URL")
	}
	opt, err := parseURL(cfg.URL)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: %w", err)
	}
	switch {
	case cfg.DialTimeout < 0:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: negative dial timeout %v", cfg.DialTimeout)
	case cfg.DialTimeout > 0 && opt.Dialer.Timeout > 0 && cfg.DialTimeout != opt.Dialer.Timeout:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: dial timeout given twice, %v in Config and %v in the URL", cfg.DialTimeout, opt.Dialer.Timeout)
	case cfg.DialTimeout > 0:
		opt.Dialer.Timeout = cfg.DialTimeout
	case opt.Dialer.Timeout == 0: // neither Config nor the URL's dial_timeout set it
		opt.Dialer.Timeout = DefaultDialTimeout
	}
	if err := checkFlushDelay(cfg.MaxFlushDelay); err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: %w", err)
	}
	switch {
	case cfg.MaxFlushDelay > 0 && opt.MaxFlushDelay > 0 && cfg.MaxFlushDelay != opt.MaxFlushDelay:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: flush delay given twice, %v in Config and %v in the URL", cfg.MaxFlushDelay, opt.MaxFlushDelay)
	case cfg.MaxFlushDelay > 0:
		opt.MaxFlushDelay = cfg.MaxFlushDelay
	}
	// Each connection's queue of commands: maxInFlight is derived from its size.
	opt.RingScaleEachConn = ringScale
	if opt.ConnWriteTimeout == 0 { // the URL's write_timeout, if any, wins
		opt.ConnWriteTimeout = connIdleTimeout(commandTimeoutOf(cfg))
	}
	// A limiter script must never be sent twice: rueidis retries only read-only commands, and
	// EVALSHA is not one, but turn retries off outright. MOVED and ASK redirects are still
	// followed: they prove the script did not run.
	opt.DisableRetry = true
	// No server-assisted client-side caching: a limiter reads nothing it could cache, and
	// tracking needs commands a least-privilege user should not have.
	opt.DisableCache = true
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.TopologyRefreshInterval = sentinelRefreshInterval
		opt.Sentinel.Username, opt.Sentinel.Password = cfg.SentinelUser, cfg.SentinelPassword
	} else if cfg.SentinelUser != "" || cfg.SentinelPassword != "" {
		return rueidis.ClientOption{}, errors.New("redisstore: sentinel credentials given with a URL without master_set: they are for Sentinel only")
	}
	if err := configureTLS(&opt, cfg); err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: %w", err)
	}
	return opt, nil
}

// configureTLS applies cfg's TLS settings to opt, which parseURL made: opt.TLSConfig is set exactly
// when the URL is rediss://.
func configureTLS(opt *rueidis.ClientOption, cfg Config) error {
	set := cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.ServerName != ""
	if opt.TLSConfig == nil {
		if set {
			return errors.New("TLS settings (CAFile, CertFile, KeyFile, ServerName) given with a URL that is not rediss://: use rediss:// for TLS, or drop them")
		}
		return nil
	}
	conf := opt.TLSConfig // fresh from rueidis.ParseURL: MinVersion TLS 1.2, ServerName the URL's host
	conf.InsecureSkipVerify = false
	if cfg.ServerName != "" {
		conf.ServerName = cfg.ServerName
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS CA file %s: no PEM certificate in it", cfg.CAFile)
		}
		conf.RootCAs = pool
	}
	switch {
	case cfg.CertFile != "" && cfg.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return fmt.Errorf("TLS client certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	case cfg.CertFile != "":
		return errors.New("TLS client certificate without its key: set KeyFile too")
	case cfg.KeyFile != "":
		return errors.New("TLS client key without its certificate: set CertFile too")
	}
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.TLSConfig = conf
	}
	return nil
}

// RedactURL returns rawURL with its whole userinfo replaced by "xxxxx", for logs and errors: a
// password may stand where the user name goes ("redis://secret@host").
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// redactErr returns err's text with the password of rawURL, if any, blanked out.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		for _, secret := range []string{u.User.String(), u.User.Username()} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "xxxxx")
			}
		}
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// Take decides r in one script call, which concurrent takes may share (Config.Coalescing). See
// admit.Store.
func (s *Store) Take(ctx context.Context, r admit.Request) (admit.Decision, error) {
	rs := [1]admit.Request{r}
	var ds [1]admit.Decision
	// Arrays sized for one policy, not bound.MaxRequests: nothing to clear but what is used.
	var (
		tokens  [1]uint64
		keyBuf  [3]string
		argsBuf [3 + takeArgsPerPolicy]string
	)
	_, err := s.take(ctx, rs[:], ds[:], tokens[:], keyBuf[:0], argsBuf[:0])
	return ds[0], err
}

// TakeAll decides rs together, all-or-nothing, in one script call, which concurrent takes may
// share (Config.Coalescing). See admit.Store.
func (s *Store) TakeAll(ctx context.Context, rs []admit.Request, ds []admit.Decision) (bool, error) {
	var (
		tokens  [bound.MaxRequests]uint64
		keyBuf  [2*bound.MaxRequests + 1]string
		argsBuf [3 + takeArgsPerPolicy*bound.MaxRequests]string
	)
	return s.take(ctx, rs, ds, tokens[:], keyBuf[:0], argsBuf[:0])
}

// take is TakeAll, building the script's keys and arguments in keyBuf and argsBuf (the caller's
// arrays, on its stack) and the lease tokens in tokens; each has room for every request a valid rs
// can hold.
func (s *Store) take(ctx context.Context, rs []admit.Request, ds []admit.Decision, tokens []uint64, keyBuf, argsBuf []string) (bool, error) {
	if err := admit.ValidateAll(rs, ds); err != nil {
		return false, fmt.Errorf("redisstore: %w", err)
	}
	tokens = tokens[:len(rs)] // at most bound.MaxRequests, now that rs is valid
	if n, wait := replication(rs, s.commandTimeout); n > 0 {
		if sess := replsession.From(ctx); sess != nil { // one wait for the request's calls
			return s.takeInSession(ctx, sess, rs, ds, tokens, keyBuf, argsBuf, n, wait)
		}
		return s.takeReplicated(ctx, rs, ds, tokens, keyBuf, argsBuf, n, wait)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	keys, args := appendTakeArgs(keyBuf, argsBuf, rs, s.tokens, tokens)
	c, err := s.conn(ctx)
	if err != nil {
		return false, fmt.Errorf("redisstore: take: %w", err)
	}
	if s.co != nil {
		return s.takeLane(ctx, c, rs, ds, tokens, keys, args)
	}
	return s.takeCall(ctx, c, rs, ds, tokens, keys, args)
}

// Release ends the lease l in one script call (docs/concurrency.md): it removes l.Token from the sorted set
// of l.Key, and nothing else. Releasing a lease that has expired, or was released already, does
// nothing and returns nil. Errors are those of Take: an invalid l, before any I/O; a key that is not
// a concurrency key's, matching admit.ErrCorruptState; anything else, admit.ErrUnavailable. Like a
// Take, a Release is never retried after it may have run (a retry would be harmless, but a timeout
// says nothing of whether it ran).
func (s *Store) Release(ctx context.Context, l admit.Lease) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	keys, args := [1]string{l.Key}, [1]string{strconv.FormatUint(l.Token, 10)}
	reply, err := s.run(ctx, releaseScript, keys[:], args[:])
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if n, err := reply.AsInt64(); err != nil || n != 0 && n != 1 {
		return fmt.Errorf("redisstore: release: %w", unavailable(fmt.Errorf("%w: want 0 or 1", errBadReply)))
	}
	return nil
}

// Settle settles res at its actual cost in one script call, scripts/settle.lua (docs/reserve-settle.md): a refund
// goes back only to the window res.Token names while the key still holds it, an overrun consumes what
// the key has left now, by Redis's clock. It reports the key's Decision after, and writes nothing when
// nothing changes. res is validated before any I/O; corrupt state is an error matching
// admit.ErrCorruptState with nothing written; a failed call is never retried, as for Take. See
// admit.Store.
func (s *Store) Settle(ctx context.Context, res admit.Reservation, actual int64) (admit.Decision, error) {
	if err := res.Validate(actual); err != nil {
		return admit.Decision{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	keys, args := settleArgs(&res, actual)
	reply, err := s.run(ctx, settleScript, keys, args)
	if err != nil {
		return admit.Decision{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	d, err := parseSettle(reply, res.Request.Limit)
	if err != nil {
		return admit.Decision{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	return d, nil
}

// Ping reports whether Redis answers, as an error matching admit.ErrUnavailable or nil.
func (s *Store) Ping(ctx context.Context) error {
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", unavailable(err))
	}
	return nil
}

// Close closes the connections and ends the subscription of OnReset. Decisions after Close fail with admit.ErrUnavailable, and decisions
// made while Close runs end by their own deadlines: closing a client of a frozen server can take a
// while, and Close holds no lock meanwhile. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.client.Swap(nil)
	s.mu.Unlock()
	s.inflight.stop()
	if c != nil {
		(*c).Close()
	}
	s.resets.stop()
	return nil
}

var errClosed = errors.New("store closed")

// conn returns the client, connecting first if need be. At most one connection attempt runs at a
// time; callers wait for it no longer than their ctx allows.
func (s *Store) conn(ctx context.Context) (rueidis.Client, error) {
	if c := s.client.Load(); c != nil {
		return *c, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, unavailable(errClosed)
	}
	if c := s.client.Load(); c != nil {
		s.mu.Unlock()
		return *c, nil
	}
	a := s.dialing
	if a == nil {
		a = &dialAttempt{done: make(chan struct{})}
		s.dialing = a
		go s.dial(a)
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		if a.err != nil {
			return nil, unavailable(a.err)
		}
		return a.client, nil
	case <-ctx.Done():
		return nil, unavailable(ctx.Err())
	}
}

// dial makes one connection attempt, bounded by the dial timeout, and publishes its outcome.
func (s *Store) dial(a *dialAttempt) {
	c, err := rueidis.NewClient(s.opt)
	var discard rueidis.Client // a client made after Close, closed outside the lock
	s.mu.Lock()
	switch {
	case err != nil:
		a.err = err
	case s.closed:
		discard, a.err = c, errClosed
	default:
		var b rueidis.Client = &bounded{Client: c, in: s.inflight}
		a.client = b
		s.client.Store(&b)
	}
	s.dialing = nil
	s.mu.Unlock()
	if discard != nil {
		discard.Close()
	}
	close(a.done)
}
