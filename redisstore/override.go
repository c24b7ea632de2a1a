package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/validate"
)

// An Override is kept in two places (docs/redis.md, "Overrides"): its own key, a string
//
//	<rate> <burst> <expires> <reason>
//
// (decimal integers, expires in Unix nanoseconds or 0 for never, each followed by one space, then the
// reason's bytes), which expires by itself at Expires (PEXPIREAT, rounded up to the millisecond), and
// which the take script reads in the same call as the subject's state; and its policy's index, the
// sorted set rl:<policy>:o:index of the override keys (every score 0, read in key order with ZRANGE
// BYLEX), which only the listing reads. The two are in different hash slots, so they are written by
// separate commands, in an order that never leaves an Override in force and missing from the index
// when an Override is set and deleted at once: SetOverride writes the key, then adds it to the index;
// DeleteOverride takes it out of the index, then deletes the key. A failure between the two, and an
// Override's expiry, leave an index entry whose key is gone, which a listing skips and removes.

// indexSuffix ends the key of a policy's index of Overrides: rl:<policy>:o:index.
const indexSuffix = "index"

// overrideIndex returns the key of the index of the Overrides of the policy named policy.
func overrideIndex(policy string) string { return validate.OverridePrefix(policy) + indexSuffix }

// encodeOverride returns the value SetOverride stores for o.
func encodeOverride(o admit.Override) string {
	var expires int64
	if !o.Expires.IsZero() {
		expires = o.Expires.UnixNano()
	}
	b := make([]byte, 0, 48+len(o.Reason))
	b = strconv.AppendInt(b, o.Rate, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, o.Burst, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, expires, 10)
	b = append(b, ' ')
	return string(append(b, o.Reason...))
}

// decodeOverride returns the Override at key whose stored value is v, or an error matching
// admit.ErrCorruptState when v is not one that encodeOverride makes.
func decodeOverride(key, v string) (admit.Override, error) {
	var n [3]int64
	rest := v
	for i := range n {
		word, after, ok := strings.Cut(rest, " ")
		x, good := decimal(word)
		if !ok || !good {
			return admit.Override{}, corruptOverride(key, "not a rate, a burst, an expiry and a reason")
		}
		n[i], rest = x, after
	}
	rate, burst, expires := n[0], n[1], n[2]
	switch {
	case rate < 1 || rate > bound.MaxRate || burst > bound.MaxRate:
		return admit.Override{}, corruptOverride(key, "rate or burst out of range")
	case len(rest) > validate.MaxReasonLen:
		return admit.Override{}, corruptOverride(key, "reason too long")
	}
	o := admit.Override{Key: key, Rate: rate, Burst: burst, Reason: rest}
	if expires != 0 {
		o.Expires = time.Unix(0, expires)
	}
	return o, nil
}

// decimal parses s as the scripts parse a number: a strict decimal integer, "0" or 1 to 19 digits
// without a leading zero, below 2^63.
func decimal(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	x, err := strconv.ParseInt(s, 10, 64)
	return x, err == nil
}

func corruptOverride(key, why string) error {
	return fmt.Errorf("%w: override %q: %s", admit.ErrCorruptState, key, why)
}

// SetOverride stores o at o.Key (SET, with PXAT Expires rounded up to the millisecond when o
// expires), adds o.Key to its policy's index (ZADD), and publishes o.Key on ResetChannel, so that
// every Store's OnReset listeners (guard.OverLimitCache) forget what they cached under the numbers
// before. o is checked before any I/O (admit.Store); a failure is an error matching
// admit.ErrUnavailable. Should the SET succeed and the ZADD fail, the Override is in force but not
// listed until it is set again: the error says so, and setting it again is harmless. A user without
// ResetACLRules gets an error matching ErrPermission after the Override is stored and listed.
func (s *Store) SetOverride(ctx context.Context, o admit.Override) error {
	if err := validate.Override(o.Key, o.Rate, o.Burst, o.Expires, o.Reason, time.Now()); err != nil {
		return fmt.Errorf("redisstore: set override: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: set override: %w", err)
	}
	set := c.B().Set().Key(o.Key).Value(encodeOverride(o))
	var cmd rueidis.Completed
	if o.Expires.IsZero() {
		cmd = set.Build()
	} else {
		ns := o.Expires.UnixNano()
		cmd = set.PxatMillisecondsTimestamp((ns + int64(time.Millisecond) - 1) / int64(time.Millisecond)).Build()
	}
	if err := c.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("redisstore: set override: %w", commandError(err))
	}
	index := overrideIndex(validate.OverridePolicy(o.Key))
	if err := c.Do(ctx, c.B().Zadd().Key(index).ScoreMember().ScoreMember(0, o.Key).Build()).Error(); err != nil {
		return fmt.Errorf("redisstore: set override: stored but not listed (set it again): %w", commandError(err))
	}
	if err := s.publishOverride(ctx, c, o.Key); err != nil {
		return fmt.Errorf("redisstore: set override: stored and listed: %w", err)
	}
	return nil
}

// publishOverride publishes key on ResetChannel and calls this Store's listeners.
func (s *Store) publishOverride(ctx context.Context, c rueidis.Client, key string) error {
	keys := []string{key}
	if err := c.Do(ctx, c.B().Publish().Channel(ResetChannel).Message(encodeKeys(keys)).Build()).Error(); err != nil {
		return fmt.Errorf("not published on %s: %w", ResetChannel, commandError(err))
	}
	s.resets.notify(keys)
	return nil
}

// commandError classifies err, a command's: a refusal by the ACL also matches ErrPermission;
// everything matches admit.ErrUnavailable.
func commandError(err error) error {
	if strings.Contains(err.Error(), "NOPERM") {
		return fmt.Errorf("%w: %w (the user needs %s)", ErrPermission, unavailable(err), ResetACLRules)
	}
	return unavailable(err)
}

// Override returns the Override stored at key (GET). A key holding what SetOverride never writes is
// an error matching admit.ErrCorruptState; a failure, admit.ErrUnavailable.
func (s *Store) Override(ctx context.Context, key string) (admit.Override, bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return admit.Override{}, false, fmt.Errorf("redisstore: override: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return admit.Override{}, false, fmt.Errorf("redisstore: override: %w", err)
	}
	o, ok, err := readOverride(c.Do(ctx, c.B().Get().Key(key).Build()), key)
	if err != nil {
		return admit.Override{}, false, fmt.Errorf("redisstore: override: %w", err)
	}
	return o, ok, nil
}

// readOverride reads res, the reply of a GET of key.
func readOverride(res rueidis.RedisResult, key string) (admit.Override, bool, error) {
	v, err := res.ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return admit.Override{}, false, nil
	case err != nil:
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "WRONGTYPE") {
			return admit.Override{}, false, corruptOverride(key, "not a string")
		}
		return admit.Override{}, false, commandError(err)
	}
	o, err := decodeOverride(key, v)
	return o, err == nil, err
}

// DeleteOverride takes key out of its policy's index (ZREM), deletes it (DEL), and publishes it on
// ResetChannel as SetOverride does. It reports whether an Override was stored at key. Should the
// ZREM succeed and the DEL fail, the Override stays in force, unlisted, until it expires or is
// deleted again: the error says so.
func (s *Store) DeleteOverride(ctx context.Context, key string) (bool, error) {
	if err := validate.OverrideKey(key); err != nil {
		return false, fmt.Errorf("redisstore: delete override: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return false, fmt.Errorf("redisstore: delete override: %w", err)
	}
	index := overrideIndex(validate.OverridePolicy(key))
	if err := c.Do(ctx, c.B().Zrem().Key(index).Member(key).Build()).Error(); err != nil {
		return false, fmt.Errorf("redisstore: delete override: %w", commandError(err))
	}
	n, err := c.Do(ctx, c.B().Del().Key(key).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("redisstore: delete override: unlisted but not deleted (delete it again): %w", commandError(err))
	}
	if err := s.publishOverride(ctx, c, key); err != nil {
		return n == 1, fmt.Errorf("redisstore: delete override: deleted: %w", err)
	}
	return n == 1, nil
}

// Overrides lists a page of the Overrides of policy: up to n members of its index after cursor
// (ZRANGE BYLEX), each read (GET). A member whose key is gone (expired, or a SetOverride or
// DeleteOverride cut short) is left out of the page and taken out of the index (ZREM, then a GET to
// put it back should a SetOverride have stored it meanwhile), so a page may hold fewer than n; the
// next cursor is "" only once the index has no member after the page's. An Override whose bytes are
// corrupt fails the page with an error matching admit.ErrCorruptState, naming its key (delete it
// with DeleteOverride).
func (s *Store) Overrides(ctx context.Context, policy, cursor string, n int) ([]admit.Override, string, error) {
	if err := validate.OverridePage(policy, cursor, n); err != nil {
		return nil, "", fmt.Errorf("redisstore: overrides: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: overrides: %w", err)
	}
	from := "-"
	if cursor != "" {
		from = "(" + cursor
	}
	index := overrideIndex(policy)
	members, err := c.Do(ctx, c.B().Zrange().Key(index).Min(from).Max("+").Bylex().Limit(0, int64(n)).Build()).AsStrSlice()
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: overrides: %w", commandError(err))
	}
	if len(members) == 0 {
		return nil, "", nil
	}
	gets := make(rueidis.Commands, len(members))
	for i, m := range members {
		gets[i] = c.B().Get().Key(m).Build()
	}
	page := make([]admit.Override, 0, len(members))
	var gone []string
	for i, res := range c.DoMulti(ctx, gets...) {
		if validate.OverridePolicy(members[i]) != policy || validate.OverrideKey(members[i]) != nil {
			return nil, "", fmt.Errorf("redisstore: overrides: %w", corruptOverride(members[i], "an index member that is no override key of the policy"))
		}
		o, ok, err := readOverride(res, members[i])
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("redisstore: overrides: %w", err)
		case ok:
			page = append(page, o)
		default:
			gone = append(gone, members[i])
		}
	}
	if len(gone) > 0 {
		if err := tidy(ctx, c, index, gone); err != nil {
			return nil, "", fmt.Errorf("redisstore: overrides: %w", err)
		}
	}
	next := ""
	if len(members) == n {
		next = members[len(members)-1]
	}
	return page, next, nil
}

// tidy takes gone, members of index whose keys were found gone, out of index, then reads them
// again and puts back any a SetOverride stored meanwhile (whose ZADD may have come before the ZREM).
func tidy(ctx context.Context, c rueidis.Client, index string, gone []string) error {
	if err := c.Do(ctx, c.B().Zrem().Key(index).Member(gone...).Build()).Error(); err != nil {
		return commandError(err)
	}
	gets := make(rueidis.Commands, len(gone))
	for i, k := range gone {
		gets[i] = c.B().Get().Key(k).Build()
	}
	for i, res := range c.DoMulti(ctx, gets...) {
		err := res.Error()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err == nil || strings.HasPrefix(err.Error(), "WRONGTYPE") { // back in the index, corrupt or not
			err = c.Do(ctx, c.B().Zadd().Key(index).ScoreMember().ScoreMember(0, gone[i]).Build()).Error()
		}
		if err != nil {
			return commandError(err)
		}
	}
	return nil
}

// OverrideCount returns the number of members of the policy's index (ZCARD): its Overrides, and
// those that expired or were cut short since a listing last tidied the index.
func (s *Store) OverrideCount(ctx context.Context, policy string) (int64, error) {
	if err := validate.OverridePage(policy, "", 1); err != nil {
		return 0, fmt.Errorf("redisstore: override count: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisstore: override count: %w", err)
	}
	n, err := c.Do(ctx, c.B().Zcard().Key(overrideIndex(policy)).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("redisstore: override count: %w", commandError(err))
	}
	return n, nil
}
