package redisstore

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
)

// A script is one Lua file and its SHA1, the name EVALSHA calls it by.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

//go:embed scripts/fixed_window.lua
var fixedWindowSrc string

var fixedWindow = newScript("fixed_window", prelude()+fixedWindowSrc)

// prelude returns the Lua that defines the bounds every script checks, rendered from the Go
// constants so that Go and Lua share one source of truth:
//
//	MAX         the largest limit, count or cost: admit.MaxRate
//	MAX_WINDOW  the longest window in milliseconds: admit.MaxPeriod
//	MAX_DIGITS  the most decimal digits either may have
func prelude() string {
	maxWindow := admit.MaxPeriod.Milliseconds()
	digits := max(len(strconv.FormatInt(admit.MaxRate, 10)), len(strconv.FormatInt(maxWindow, 10)))
	return fmt.Sprintf("local MAX = %d\nlocal MAX_WINDOW = %d\nlocal MAX_DIGITS = %d\n", admit.MaxRate, maxWindow, digits)
}

// Error-reply prefixes the scripts raise before any write.
const (
	invalidPrefix = "ADMIT_INVALID"
	corruptPrefix = "ADMIT_CORRUPT"
)

// run calls sc with EVALSHA. On NOSCRIPT (Redis restarted, SCRIPT FLUSH, a new node) it loads the
// script on every node and calls EVALSHA once more: NOSCRIPT proves the first call did not run.
// Nothing else is retried.
func (s *Store) run(ctx context.Context, sc *script, keys, args []string) (rueidis.RedisMessage, error) {
	c, err := s.conn(ctx)
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	evalsha := func() rueidis.RedisResult {
		return c.Do(ctx, c.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	res := evalsha()
	if isNoScript(res.Error()) {
		if err := load(ctx, c, sc); err != nil {
			return rueidis.RedisMessage{}, unavailable(fmt.Errorf("loading %s script: %w", sc.name, err))
		}
		res = evalsha()
	}
	msg, err := res.ToMessage()
	if err != nil {
		return rueidis.RedisMessage{}, scriptError(err)
	}
	return msg, nil
}

// load runs SCRIPT LOAD on every node the client knows, so that EVALSHA finds the script whichever
// node serves the key's slot.
func load(ctx context.Context, c rueidis.Client, sc *script) error {
	for addr, node := range c.Nodes() {
		sha, err := node.Do(ctx, node.B().ScriptLoad().Script(sc.src).Build()).ToString()
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		if sha != sc.sha {
			return fmt.Errorf("%s: SCRIPT LOAD returned %s, want %s", addr, sha, sc.sha)
		}
	}
	return nil
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// scriptError classifies an error from a script call: the script's own ADMIT_INVALID and
// ADMIT_CORRUPT replies, or anything else as unavailable.
func scriptError(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, corruptPrefix):
			return fmt.Errorf("%w: %s", admit.ErrCorruptState, strings.TrimSpace(strings.TrimPrefix(msg, corruptPrefix)))
		case strings.HasPrefix(msg, invalidPrefix):
			return fmt.Errorf("%w: script refused: %s", admit.ErrInvalidRequest, strings.TrimSpace(strings.TrimPrefix(msg, invalidPrefix)))
		}
	}
	return unavailable(err)
}

// unavailable wraps err so that it matches admit.ErrUnavailable.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", admit.ErrUnavailable, err)
}

func fixedWindowArgs(lim admit.Limit, n int64) []string {
	return []string{
		strconv.FormatInt(lim.Rate, 10),
		strconv.FormatInt(lim.Period.Milliseconds(), 10),
		strconv.FormatInt(n, 10),
	}
}

// errBadReply means a script answered with something it never sends.
var errBadReply = errors.New("malformed script reply")

// parseDecision reads a script's reply {allowed, remaining, retry_after_ms, reset_after_ms},
// checking every element's type and range.
func parseDecision(msg rueidis.RedisMessage, lim admit.Limit) (admit.Decision, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 4 {
		return admit.Decision{}, unavailable(fmt.Errorf("%w: want an array of 4 integers", errBadReply))
	}
	var v [4]int64
	for i := range arr {
		if v[i], err = arr[i].AsInt64(); err != nil {
			return admit.Decision{}, unavailable(fmt.Errorf("%w: element %d: %v", errBadReply, i, err))
		}
	}
	allowed, remaining, retryMS, resetMS := v[0], v[1], v[2], v[3]
	maxMS := lim.Period.Milliseconds()
	if allowed != 0 && allowed != 1 || remaining < 0 || remaining > lim.Rate ||
		retryMS < 0 || retryMS > maxMS || resetMS < 0 || resetMS > maxMS {
		return admit.Decision{}, unavailable(fmt.Errorf("%w: %v out of range", errBadReply, v))
	}
	return admit.Decision{
		Allowed:    allowed == 1,
		Limit:      lim,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryMS) * time.Millisecond,
		ResetAfter: time.Duration(resetMS) * time.Millisecond,
	}, nil
}
