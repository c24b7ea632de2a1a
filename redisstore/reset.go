package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/admit-dev/admit/internal/slot"
	"github.com/admit-dev/admit/internal/validate"
)

// ResetChannel is the Redis channel a Reset is published on, for every Store's listeners
// ([Store.OnReset]): its message is the keys reset, each as its length in decimal, ':' and its bytes.
const ResetChannel = "rl:reset"

// ResetACLRules are the rules a user needs besides ACLRules to reset keys (DEL, already among them,
// and PUBLISH on ResetChannel) and to hear other instances' resets (SUBSCRIBE to it). Without them
// every Store still decides; a Reset fails (ErrPermission), and a listener hears nothing.
const ResetACLRules = "&" + ResetChannel + " +publish +subscribe"

// Bounds of the subscription's retries after it is lost or refused.
const (
	resubscribeFirst = 50 * time.Millisecond
	resubscribeMost  = 2 * time.Second
)

// Reset deletes keys in Redis and publishes them on ResetChannel, keys of one hash slot in one
// transaction (MULTI, DEL, PUBLISH, EXEC): a slot's keys are deleted and published together or not
// at all. Keys are validated before any I/O (see admit.Store); the whole call is bounded by the
// command timeout. A failure is an error matching admit.ErrUnavailable (ErrPermission too when the
// user may not PUBLISH, and then nothing of that slot is deleted); in a cluster the slots done
// before it stay reset. Idempotency records are left alone. Once it succeeds it calls this Store's
// listeners itself; the other Stores hear the publication.
func (s *Store) Reset(ctx context.Context, keys []string) error {
	if err := validate.ResetKeys(keys); err != nil {
		return fmt.Errorf("redisstore: reset: %w", err)
	}
	ctx, bounded := s.bound(ctx)
	defer bounded.release()
	c, err := s.conn(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: reset: %w", err)
	}
	groups := [][]string{keys}
	if c.Mode() == rueidis.ClientModeCluster {
		groups = bySlot(keys)
	}
	for _, g := range groups {
		if err := resetGroup(ctx, c, g); err != nil {
			return fmt.Errorf("redisstore: reset: %w", err)
		}
	}
	s.resets.notify(keys)
	return nil
}

// resetGroup deletes and publishes keys, of one slot on a cluster, in one transaction.
func resetGroup(ctx context.Context, c rueidis.Client, keys []string) error {
	resps := c.DoMulti(ctx,
		c.B().Multi().Build(),
		c.B().Del().Key(keys...).Build(),
		c.B().Publish().Channel(ResetChannel).Message(encodeKeys(keys)).Build(),
		c.B().Exec().Build())
	for _, r := range resps {
		if err := r.Error(); err != nil {
			if msg := err.Error(); strings.Contains(msg, "NOPERM") {
				need := "a key pattern covering the keys"
				if !strings.Contains(msg, "keys") {
					need = ResetACLRules
				}
				return fmt.Errorf("%w: %w (the user needs %s)", ErrPermission, unavailable(err), need)
			}
			return unavailable(err)
		}
	}
	if replies, err := resps[3].ToArray(); err != nil || len(replies) != 2 {
		return unavailable(fmt.Errorf("%w: EXEC of a reset answered %d replies (%v), want 2", errBadReply, len(replies), err))
	}
	return nil
}

// bySlot returns keys grouped by hash slot, each group in the order of keys.
func bySlot(keys []string) [][]string {
	var groups [][]string
	index := map[uint16]int{}
	for _, k := range keys {
		sl := slot.Of(k)
		i, ok := index[sl]
		if !ok {
			i = len(groups)
			index[sl] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], k)
	}
	return groups
}

// encodeKeys returns the message of a reset of keys: each key as its length, ':' and its bytes.
func encodeKeys(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// decodeKeys returns the keys of a reset's message, or an error if msg is not one.
func decodeKeys(msg string) ([]string, error) {
	var keys []string
	for msg != "" {
		n, rest, ok := strings.Cut(msg, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 1 || size > len(rest) {
			return nil, errors.New("malformed reset message")
		}
		keys, msg = append(keys, rest[:size]), rest[size:]
	}
	if len(keys) == 0 {
		return nil, errors.New("reset message of no keys")
	}
	return keys, nil
}

// OnReset registers fn to be called with the keys of every reset published on ResetChannel, by any
// Store on the same Redis, this one included (whose own Reset also calls fn once it succeeds). The
// first call starts the Store's subscription: one dedicated connection, subscribed until Close, and
// subscribed again after it is lost (a reset published meanwhile is not heard: what a listener
// caches must expire by itself, as guard.OverLimitCache's entries do). fn is called from one
// goroutine at a time, must return quickly and must not call the Store; Close waits for it.
func (s *Store) OnReset(fn func(keys []string)) {
	s.resets.mu.Lock()
	defer s.resets.mu.Unlock()
	s.resets.fns = append(s.resets.fns, fn)
	if s.resets.done != nil || s.resets.closed {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.resets.cancel, s.resets.done = cancel, make(chan struct{})
	go s.subscribe(ctx, s.resets.done)
}

// A listeners is a Store's OnReset functions and the subscription that calls them.
type listeners struct {
	mu         sync.Mutex
	fns        []func(keys []string)
	cancel     context.CancelFunc // ends the subscription; nil before the first OnReset
	done       chan struct{}      // closed when the subscription has ended
	closed     bool
	subscribed atomic.Int64 // times the subscription was confirmed by Redis
	heard      atomic.Int64 // resets heard on the channel
}

// notify calls every listener with keys.
func (l *listeners) notify(keys []string) {
	l.mu.Lock()
	fns := l.fns
	l.mu.Unlock()
	for _, fn := range fns {
		fn(keys)
	}
}

// stop ends the subscription, if any, and waits for it.
func (l *listeners) stop() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// subscribe keeps a dedicated connection subscribed to ResetChannel until ctx ends, and calls the
// listeners with every reset heard; it closes done when it returns.
func (s *Store) subscribe(ctx context.Context, done chan struct{}) {
	defer close(done)
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind == "subscribe" {
			s.resets.subscribed.Add(1)
		}
	})
	wait := resubscribeFirst
	for ctx.Err() == nil {
		start := time.Now()
		if c, err := s.conn(ctx); err == nil {
			_ = c.Dedicated(func(dc rueidis.DedicatedClient) error {
				return dc.Receive(hooked, dc.B().Subscribe().Channel(ResetChannel).Build(), func(m rueidis.PubSubMessage) {
					if keys, err := decodeKeys(m.Message); err == nil {
						s.resets.heard.Add(1)
						s.resets.notify(keys)
					}
				})
			})
		}
		if time.Since(start) > resubscribeMost {
			wait = resubscribeFirst // it was subscribed a while: try again soon
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, resubscribeMost)
	}
}
