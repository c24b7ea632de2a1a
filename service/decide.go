package service

import (
	"context"
	"fmt"
	"math"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/bound"
	"github.com/admit-dev/admit/internal/replsession"
	"github.com/admit-dev/admit/internal/slot"
	"go.opentelemetry.io/otel/trace"
)

// An Item is one Limit to decide for a subject with [Service.DecideItems]: a limit that a
// transport resolved itself (an Envoy rule), not a policy of the loaded configuration.
type Item struct {
	// Limit is what the Item is decided under: a valid Limit (admit.Limit.Validate) with a name.
	Limit admit.Limit
	// Version is the key version of the Limit's name (admit.KeyBuilder.Key).
	Version string
	// Subject is who is limited: digested into the Item's key, never stored.
	Subject admit.Subject
	// Cost is the units asked for: 0 (a peek) or more. A cost above the Limit's capacity can never
	// be admitted: it is decided as a peek, and not allowed.
	Cost int64
}

// A Grouping says which Items [Service.DecideItems] decides together.
type Grouping uint8

const (
	// Separately decides each Item on its own, in order: an Item repeated is counted once per
	// repetition, as envoyproxy/ratelimit counts descriptors.
	Separately Grouping = iota
	// BySlot decides the Items whose keys share a hash slot together, all-or-nothing, up to
	// bound.MaxRequests keys at a time, in the order of their first Items; Items of one key under
	// one Limit are one Request, of their costs summed. An Item over its Limit's capacity makes
	// its group a peek: nothing of the group is counted.
	BySlot
	// together is a Check's: every Item in one all-or-nothing decision, at its own cost, a cost
	// over a capacity an invalid request; with a request ID, and admit.Hold when held.
	together
)

// An ItemError is the error of an Item that cannot be decided, found before any I/O: Err matches
// admit.ErrInvalidLimit or admit.ErrInvalidRequest.
type ItemError struct {
	// Index is the Item's index in the Items decided.
	Index int
	// Err is why the Item cannot be decided.
	Err error

	keyed bool // its key was made, and its Request failed its check
}

// Error returns Err, after the Item's index.
func (e *ItemError) Error() string { return fmt.Sprintf("item %d: %v", e.Index, e.Err) }

// Unwrap returns Err.
func (e *ItemError) Unwrap() error { return e.Err }

// DecideItems decides items on the Service's Store, grouped by g, and fills ds (len(items)
// elements) with their Decisions, in order. It decides through the function Check and Admit
// decide through; no items is no I/O. An error is an [*ItemError] for an Item that cannot be
// decided, or one matching admit.ErrInvalidRequest for ds of another length or an unknown g, all
// before any I/O; else the Store's, after which the groups decided before stay decided.
func (s *Service) DecideItems(ctx context.Context, items []Item, ds []admit.Decision, g Grouping) error {
	switch {
	case len(ds) != len(items):
		return fmt.Errorf("%w: %d Decisions for %d items", admit.ErrInvalidRequest, len(ds), len(items))
	case g != Separately && g != BySlot:
		return fmt.Errorf("%w: unknown grouping %d", admit.ErrInvalidRequest, g)
	case len(items) == 0:
		return nil
	}
	_, _, err := s.decide(ctx, items, ds, plan{grouping: g})
	return err
}

// A plan is how decide decides its Items.
type plan struct {
	grouping Grouping
	id       string // the request ID of every Request; together only
	hold     bool   // decide with admit.Hold and return its release; together only
}

// decide is the one decision of the Service: Check, Admit and DecideItems call it, and it is the
// only caller of the Store in package service and the transports (TestOneDecisionCore). It makes
// the Requests of items (admit.Requests: keys, checked before any I/O), groups them as p says,
// decides each group on the Store in one TakeAll, and fills ds; it counts a Check's rejections in
// its policies' top sketches (countRejections), in memory. allowed reports whether every
// Item was allowed but those in shadow mode; release is admit.Hold's when p.hold, else nil.
func (s *Service) decide(ctx context.Context, items []Item, ds []admit.Decision, p plan) (allowed bool, release func(), err error) {
	if s.tracing.Tracer != nil { // off: no span, no allocation (TestTracingOffAllocates)
		var span trace.Span
		ctx, span = s.startDecide(ctx, items, p)
		defer func() { endDecide(span, ds, allowed, err) }()
	}
	// The Requests in the Items' order; BySlot, which regroups them, keeps only their keys.
	var rs []admit.Request
	var keys, okeys []string // BySlot's: each Request's Key and OverrideKey
	if p.grouping == BySlot {
		keys, okeys = make([]string, len(items)), make([]string, len(items))
	} else {
		rs = make([]admit.Request, len(items))
	}
	for i := range items {
		cost, id := items[i].Cost, p.id
		if p.grouping != together {
			if cost < 0 {
				return false, nil, &ItemError{Index: i, Err: fmt.Errorf("%w: cost %d below 0", admit.ErrInvalidRequest, cost)}
			}
			cost, id = 0, "" // summed, and made a peek when over, below
		}
		var one [1]admit.Request
		r := one[:]
		if rs != nil {
			r = rs[i : i+1]
		}
		if err := s.request(r, &items[i], cost, id); err != nil {
			return false, nil, &ItemError{Index: i, Err: err, keyed: r[0].Key != ""}
		}
		r[0].Cost = items[i].Cost
		if keys != nil {
			keys[i], okeys[i] = r[0].Key, r[0].OverrideKey
		}
	}
	switch p.grouping {
	case together: // a Check's policies: their rejections are counted (Service.Top)
		sctx, span := s.storeSpan(ctx, len(rs))
		if p.hold {
			allowed, release, err = admit.Hold(sctx, s.store, rs, ds)
		} else {
			allowed, err = s.store.TakeAll(sctx, rs, ds)
		}
		endStore(span, err)
		if err == nil {
			s.countRejections(items, rs, ds)
		}
		return allowed, release, err
	case Separately:
		var sess *replsession.Session // one wait for the calls' replicated admissions
		if len(rs) > 1 && replicated(items) {
			ctx, sess = replsession.New(ctx)
		}
		allowed = true
		for i := range rs {
			var over [1]bool
			peeked := peek(rs[i:i+1], over[:])
			sctx, span := s.storeSpan(ctx, 1)
			ok, err := s.store.TakeAll(sctx, rs[i:i+1], ds[i:i+1])
			endStore(span, err)
			if err != nil {
				sess.Abort(err)
				return false, nil, err
			}
			if over[0] {
				ds[i].Allowed = false
			}
			allowed = allowed && ok && !peeked
		}
		if err := waitOnce(ctx, sess, ds); err != nil {
			return false, nil, err
		}
		return allowed, nil, nil
	}
	b := newBatch(items, keys, okeys)
	var sess *replsession.Session
	if len(b.ends) > 1 && replicated(items) {
		ctx, sess = replsession.New(ctx)
	}
	allowed = true
	start := 0
	for _, end := range b.ends {
		peeked := peek(b.rs[start:end], b.over[start:end])
		sctx, span := s.storeSpan(ctx, end-start)
		ok, err := s.store.TakeAll(sctx, b.rs[start:end], b.ds[start:end])
		endStore(span, err)
		if err != nil {
			sess.Abort(err)
			return false, nil, err
		}
		allowed = allowed && ok && !peeked
		start = end
	}
	for i, j := range b.of {
		ds[i] = b.ds[j]
		if b.over[j] {
			ds[i].Allowed = false
		}
	}
	if err := waitOnce(ctx, sess, ds); err != nil {
		return false, nil, err
	}
	return allowed, nil, nil
}

// replicated reports whether an Item of items asks for replicas and writes (admit.Limit.Replicas,
// a cost above 0): then the Store calls of one decision share a replsession, waited for once.
func replicated(items []Item) bool {
	for i := range items {
		if items[i].Limit.Replicas > 0 && items[i].Cost > 0 {
			return true
		}
	}
	return false
}

// waitOnce waits once for every admission the Store calls of a decision deferred to sess (none
// when sess is nil). When one was not confirmed the whole decision is undecided: nothing in ds is
// admitted, and the error, matching admit.ErrUnavailable, is returned.
func waitOnce(ctx context.Context, sess *replsession.Session, ds []admit.Decision) error {
	if sess == nil {
		return nil
	}
	if err := sess.Wait(ctx); err != nil {
		for i := range ds {
			ds[i].Allowed, ds[i].Token = false, 0
		}
		return err
	}
	return nil
}

// request makes r[0], whose Limit it sets, the Request of it at cost n with request ID id.
func (s *Service) request(r []admit.Request, it *Item, n int64, id string) error {
	r[0].Limit = it.Limit
	version := [1]string{it.Version}
	return admit.Requests(r, s.keys, version[:], it.Subject, n, id)
}

// peek makes a peek of each Request of a group whose cost is over its Limit's capacity, marking
// it in over, and of every Request of the group when one of those is enforced (not in shadow
// mode): then the group can never be admitted, and peek reports true.
func peek(rs []admit.Request, over []bool) bool {
	rejected := false
	for j := range rs {
		if rs[j].Cost > rs[j].Limit.Capacity() {
			over[j] = true
			rejected = rejected || !rs[j].Limit.Shadow
			rs[j].Cost = 0
		}
	}
	if rejected {
		for j := range rs {
			rs[j].Cost = 0
		}
	}
	return rejected
}

// A batch is BySlot's groups of Requests, each group's contiguous, in the order of its first Item.
type batch struct {
	rs   []admit.Request  // the groups' Requests, each of its Items' costs summed
	ds   []admit.Decision // their Decisions
	over []bool           // per Request: its cost is over its Limit's capacity (peek)
	ends []int            // per group, the end of its Requests in rs
	of   []int            // per Item, the index in rs of the Request that decides it
}

// newBatch returns the batch of items, whose keys are keys and override keys okeys: an Item whose key shares a hash slot
// joins the first group of that slot with room (bound.MaxRequests), or the one that has its key
// under its Limit, whose cost its own joins; a key under another Limit (a limit override) goes
// apart.
func newBatch(items []Item, keys, okeys []string) batch {
	n := len(items)
	idx := make([]int, 2*n)
	b := batch{of: idx[:n], ends: idx[n:n]}
	type request struct {
		first, group, at int // its first Item, its group, and its index in b.rs
		cost             int64
	}
	type group struct {
		slot       uint16
		size, next int
	}
	var reqBuf [bound.MaxRequests]request
	var groupBuf [bound.MaxRequests]group
	reqs, groups := reqBuf[:0], groupBuf[:0]
	if n > bound.MaxRequests {
		reqs, groups = make([]request, 0, n), make([]group, 0, n)
	}
	for i := range items {
		slot := slot.Of(keys[i])
		g, j := -1, -1
	candidates:
		for k := range groups {
			if groups[k].slot != slot {
				continue
			}
			for d := range reqs {
				if f := reqs[d].first; reqs[d].group == k && keys[f] == keys[i] {
					if items[f].Limit == items[i].Limit {
						g, j = k, d // a repeated Item: its cost joins the first's
						break candidates
					}
					continue candidates // the same key under another Limit: apart
				}
			}
			if groups[k].size < bound.MaxRequests {
				g = k
				break
			}
		}
		if g < 0 {
			g = len(groups)
			groups = append(groups, group{slot: slot})
		}
		if j < 0 {
			j = len(reqs)
			reqs = append(reqs, request{first: i, group: g})
			groups[g].size++
		}
		if c, n := &reqs[j].cost, items[i].Cost; n > math.MaxInt64-*c {
			*c = math.MaxInt64 // over any capacity, as the sum is
		} else {
			*c += n
		}
		b.of[i] = j
	}
	end := 0
	for k := range groups {
		groups[k].next = end
		end += groups[k].size
		b.ends = append(b.ends, end)
	}
	b.rs = make([]admit.Request, len(reqs))
	b.ds = make([]admit.Decision, len(reqs))
	b.over = make([]bool, len(reqs))
	for d := range reqs {
		q := &reqs[d]
		g := &groups[q.group]
		q.at, g.next = g.next, g.next+1
		b.rs[q.at] = admit.Request{Key: keys[q.first], OverrideKey: okeys[q.first], Limit: items[q.first].Limit, Cost: q.cost}
	}
	for i, j := range b.of {
		b.of[i] = reqs[j].at
	}
	return b
}
