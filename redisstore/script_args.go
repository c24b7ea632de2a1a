package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/algo"
	"github.com/admit-dev/admit/internal/bound"
)

// takeArgs returns the KEYS and ARGV of the take script for rs: each policy's key, then each
// override key (Request.OverrideKey, in order), then the record's key for a request with an ID; the
// policy count, the fingerprint (” without an ID), the policies' flags (flagMask), then each
// policy's algorithm and arguments. It fills tokens, of len(rs) elements, with the lease each
// Request acquires if admitted, made by src (see algo.LeaseTokens), or 0.
func takeArgs(rs []admit.Request, src *algo.TokenSource, tokens []uint64) (keys, args []string) {
	return appendTakeArgs(make([]string, 0, 2*len(rs)+1), make([]string, 0, 3+takeArgsPerPolicy*len(rs)), rs, src, tokens)
}

// takeArgsPerPolicy is the most arguments policyArgs appends for one policy.
const takeArgsPerPolicy = 5

// appendTakeArgs is takeArgs appending to keys and args, so that a caller can build them in arrays
// of its own, on its stack: the decision path allocates nothing for them.
func appendTakeArgs(keys, args []string, rs []admit.Request, src *algo.TokenSource, tokens []uint64) ([]string, []string) {
	id := rs[0].ID
	fp := ""
	if id != "" {
		fp = algo.Fingerprint(rs)
	}
	algo.LeaseTokens(src, rs, fp, tokens)
	args = append(args, formatInt(int64(len(rs))), fp, flagMask(rs))
	for i := range rs {
		r := &rs[i]
		keys = append(keys, r.Key)
		args = policyArgs(args, r, tokens[i])
	}
	for i := range rs {
		if rs[i].OverrideKey != "" {
			keys = append(keys, rs[i].OverrideKey)
		}
	}
	if id != "" {
		keys = append(keys, algo.RecordKey(rs[0].Key, id))
	}
	return keys, args
}

// flagMask returns the take script's argument of the policies' flags: "" when no policy is in
// shadow mode nor has an override key, else a digit per policy, the sum of 1 for shadow mode, 2 for
// an override key, and 4 for a GCRA policy with an override key whose burst follows its rate (Burst
// 0: an override's rate is then its burst too, unless the override sets a burst); one digit when
// every policy's is the same.
func flagMask(rs []admit.Request) string {
	any := false
	for i := range rs {
		any = any || rs[i].Limit.Shadow || rs[i].OverrideKey != ""
	}
	if !any {
		return ""
	}
	var buf [bound.MaxRequests]byte
	same := true
	for i := range rs {
		buf[i] = '0' + flags(&rs[i])
		same = same && buf[i] == buf[0]
	}
	if same { // the common call (every policy with an override key, say): one digit for all
		return flagDigits[buf[0]-'0']
	}
	return string(buf[:len(rs)])
}

// flagDigits are the masks of one digit, by flags.
var flagDigits = [8]string{"0", "1", "2", "3", "4", "5", "6", "7"}

// flags returns r's flags in the take script's mask (flagMask).
func flags(r *admit.Request) byte {
	var f byte
	if r.Limit.Shadow {
		f |= 1
	}
	if r.OverrideKey != "" {
		f |= 2
		if r.Limit.Algorithm == admit.GCRA && r.Limit.Burst == 0 {
			f |= 4
		}
	}
	return f
}

// policyArgs appends the take script's arguments of r's policy: its algorithm's name, then the
// arguments that algorithm's module parses (scripts/<algorithm>.lua); token is the lease r acquires,
// or 0.
func policyArgs(args []string, r *admit.Request, token uint64) []string {
	lim := &r.Limit
	args = append(args, lim.Algorithm.String(),
		formatInt(lim.Rate),
		formatInt(lim.Period.Milliseconds()),
		formatInt(r.Cost))
	switch lim.Algorithm {
	case admit.FixedWindow:
		// limit, window, cost, then aligned
		aligned := "0"
		if lim.Aligned {
			aligned = "1"
		}
		args = append(args, aligned)
	case admit.GCRA:
		// rate, window, cost, burst
		args = append(args, formatInt(lim.Capacity()))
	case admit.SlidingWindow:
		// limit, window, cost
	case admit.SlidingLog:
		// limit, window, cost
	case admit.Concurrency:
		// limit, lease TTL, cost, then the lease's token ('0' for a peek); a token is random, not
		// worth caching
		args = append(args, strconv.FormatUint(token, 10))
	}
	return args
}

// A numString is a number and its decimal form.
type numString struct {
	n int64
	s string
}

// numStrings caches the decimal forms of the numbers policies pass to the scripts (rates, periods,
// costs, bursts), which repeat from call to call: one slot per hash of the number, the last number
// formatted wins it. A miss only formats the number afresh.
var numStrings [1024]atomic.Pointer[numString]

// formatInt returns n in decimal, like strconv.FormatInt(n, 10), without allocating for a number
// formatted recently.
func formatInt(n int64) string {
	if n >= 0 && n < 100 {
		return strconv.FormatInt(n, 10) // a constant string: strconv allocates nothing for these
	}
	slot := &numStrings[uint64(n)*0x9e3779b97f4a7c15>>(64-10)]
	if e := slot.Load(); e != nil && e.n == n {
		return e.s
	}
	s := strconv.FormatInt(n, 10)
	slot.Store(&numString{n: n, s: s})
	return s
}

// errBadReply means a script answered with something it never sends.
var errBadReply = errors.New("malformed script reply")

// parseTake reads the take script's reply {allowed, replayed, then per policy: allowed, remaining,
// retry_after_ms, reset_after_ms, token, then per policy decided under an override: its number,
// the override's rate and burst} into ds, checking every element's type and range: a token is 0
// unless its policy admitted a cost above 0 afresh, and only a Request with an OverrideKey is
// overridden. When all are admitted, the Token of a Decision whose Request passed a lease token in
// tokens (a concurrency policy's) is that token (for a replay, the same: a request with an ID
// derives its tokens from it). An overridden Decision's Limit is its Request's with the override's
// Rate, and for GCRA its Burst when above 0.
func parseTake(msg rueidis.RedisMessage, rs []admit.Request, ds []admit.Decision, tokens []uint64) (bool, error) {
	arr, err := msg.ToArray()
	base := 2 + perPolicy*len(rs)
	if err != nil || len(arr) < base || (len(arr)-base)%3 != 0 || len(arr) > base+3*len(rs) {
		return false, unavailable(fmt.Errorf("%w: want an array of %d integers, and 3 per policy overridden", errBadReply, base))
	}
	var v [2 + (perPolicy+3)*bound.MaxRequests]int64
	for i := range arr {
		if v[i], err = arr[i].AsInt64(); err != nil {
			return false, unavailable(fmt.Errorf("%w: element %d: %v", errBadReply, i, err))
		}
	}
	allowed, replayed := v[0], v[1]
	if allowed != 0 && allowed != 1 || replayed != 0 && replayed != 1 || replayed == 1 && allowed == 0 {
		return false, unavailable(fmt.Errorf("%w: allowed %d, replayed %d", errBadReply, allowed, replayed))
	}
	all, x := true, base
	for i := range rs {
		at := 2 + perPolicy*i
		lim, over := rs[i].Limit, false
		if x < len(arr) && v[x] == int64(i+1) {
			rate, burst := v[x+1], v[x+2]
			if rs[i].OverrideKey == "" || rate < 1 || rate > bound.MaxRate || burst < 0 || burst > bound.MaxRate {
				return false, unavailable(fmt.Errorf("%w: policy %d: override %d, %d", errBadReply, i, rate, burst))
			}
			lim.Rate, over, x = rate, true, x+3
			if lim.Algorithm == admit.GCRA && burst > 0 {
				lim.Burst = burst
			}
		}
		d, err := decision(v[at:at+4], lim)
		if err != nil {
			return false, err
		}
		token := v[at+4]
		if token < 0 || token > 0 && (!d.Allowed || replayed == 1 || rs[i].Cost == 0) {
			return false, unavailable(fmt.Errorf("%w: policy %d: token %d of a decision that holds nothing", errBadReply, i, token))
		}
		d.Replayed, d.Token, d.Overridden = replayed == 1, uint64(token), over
		ds[i] = d
		all = all && (d.Allowed || rs[i].Limit.Shadow) // a shadow rejection rejects nothing
	}
	if x != len(arr) {
		return false, unavailable(fmt.Errorf("%w: override of a policy out of order or out of range", errBadReply))
	}
	if all != (allowed == 1) {
		return false, unavailable(fmt.Errorf("%w: overall allowed %d disagrees with the policies'", errBadReply, allowed))
	}
	for i := range ds {
		if all && ds[i].Allowed && tokens[i] != 0 { // a rejection acquires nothing, not even under a policy that would have admitted
			ds[i].Token = tokens[i]
		}
	}
	return all, nil
}

// perPolicy is the number of integers the take script replies per policy.
const perPolicy = 5

// parseSettle reads the settle script's reply {allowed, remaining, retry_after_ms, reset_after_ms}
// under lim, checking every element's type and range.
func parseSettle(msg rueidis.RedisMessage, lim admit.Limit) (admit.Decision, error) {
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
	return decision(v[:], lim)
}

// decision reads one policy's {allowed, remaining, retry_after_ms, reset_after_ms}.
func decision(v []int64, lim admit.Limit) (admit.Decision, error) {
	allowed, remaining, retryMS, resetMS := v[0], v[1], v[2], v[3]
	maxMS := lim.MaxWait().Milliseconds()
	if allowed != 0 && allowed != 1 || remaining < 0 || remaining > lim.Capacity() ||
		retryMS < 0 || retryMS > maxMS || resetMS < 0 || resetMS > maxMS {
		// A copy, not v: passing v to fmt would move the caller's array to the heap on every call.
		return admit.Decision{}, unavailable(fmt.Errorf("%w: %v out of range", errBadReply, [4]int64{allowed, remaining, retryMS, resetMS}))
	}
	return admit.Decision{
		Allowed:    allowed == 1,
		Limit:      lim,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryMS) * time.Millisecond,
		ResetAfter: time.Duration(resetMS) * time.Millisecond,
	}, nil
}

// settleArgs returns the KEYS and ARGV of the settle script for res at actual: the key; the
// algorithm's name and arguments, as take passes them, with the cost reserved; the token; the actual
// cost. A token above algo.MaxTAT, which the take script never reports, is passed as 0, which names
// no window: the reservation then has nothing to refund, and an overrun still consumes.
func settleArgs(res *admit.Reservation, actual int64) (keys, args []string) {
	token := res.Token
	if token > algo.MaxTAT {
		token = 0
	}
	args = policyArgs(make([]string, 0, 7), &res.Request, 0) // a lease is never settled
	args = append(args, strconv.FormatUint(token, 10), formatInt(actual))
	return []string{res.Request.Key}, args
}
