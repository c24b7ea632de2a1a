package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/topk"
	"github.com/admit-dev/admit/policy"
)

// ErrTopOff is the error of [Service.Top] when the loaded configuration keeps no sketch
// (server.top.size 0).
var ErrTopOff = fmt.Errorf("%w: no top subjects: server.top.size is 0", admit.ErrInvalidRequest)

// A TopEntry is one subject of a [TopReport]: its digest, its raw subject when revealed, the
// rejections counted and their bound, and when it was first and last rejected.
type TopEntry = topk.Entry

// A TopReport is the subjects rejected most under one policy, as [Service.Top] reads them.
type TopReport struct {
	// Policy is the policy's name.
	Policy string
	// Size is the most subjects the policy's sketch holds (server.top.size).
	Size int
	// Period is how long a rejection counts: at least all of it, at most a tenth more.
	Period time.Duration
	// Revealed reports whether the sketch keeps raw subjects (server.top.reveal_subjects).
	Revealed bool
	// Entries are the subjects, most rejected first.
	Entries []TopEntry
	// Bound is the most by which any subject's count may be off (topk.Report.Bound).
	Bound uint64
}

// tops are the sketches of one configuration's policies, by name, under its server.top.
type tops struct {
	settings policy.Top
	byName   map[string]*topk.Sketch
}

// newTops returns the sketches of cfg's policies: old's of the same name when old was made under
// the same server.top, new ones for the others. Under size 0 there are none.
func newTops(cfg *policy.Config, old *tops) *tops {
	t := &tops{settings: cfg.Server.Top, byName: make(map[string]*topk.Sketch, len(cfg.Policies))}
	if t.settings.Size == 0 {
		return t
	}
	for _, p := range cfg.Policies {
		name := p.Limit.Name
		if old != nil && old.settings == t.settings && old.byName[name] != nil {
			t.byName[name] = old.byName[name]
			continue
		}
		sk, err := topk.New(topk.Options{Size: t.settings.Size, Period: t.settings.Period, Reveal: t.settings.RevealSubjects})
		if err != nil { // a Config that parsed has settings in bounds: no sketch for a hand-made one out of them
			continue
		}
		t.byName[name] = sk
	}
	return t
}

// countRejections counts, in the sketches of the loaded configuration's policies, each Request of
// rs that ds says was really rejected: a cost above 0, not allowed, not a replay, not in shadow
// mode. It writes nothing to the Store and allocates nothing.
func (s *Service) countRejections(items []Item, rs []admit.Request, ds []admit.Decision) {
	t := s.top.Load()
	if len(t.byName) == 0 {
		return
	}
	for i := range rs {
		if rs[i].Cost <= 0 || ds[i].Allowed || ds[i].Replayed || rs[i].Limit.Shadow {
			continue
		}
		if sk := t.byName[rs[i].Limit.Name]; sk != nil {
			sk.Add(subjectDigest(rs[i].Key), items[i].Subject.ID)
		}
	}
}

// subjectDigest returns the subject digest that key ends with: its last topk.DigestLen
// characters, after the '}' of a key of one digest; "" for a key too short.
func subjectDigest(key string) string {
	key = strings.TrimSuffix(key, "}")
	if len(key) < topk.DigestLen {
		return ""
	}
	return key[len(key)-topk.DigestLen:]
}

// Top returns the n subjects rejected most under the policy name of the loaded configuration, from
// this process's sketch: only its own decisions, counted in its memory. n is 1 to the sketch's
// size. Its errors match ErrUnknownPolicy, ErrTopOff or, for n out of bounds,
// admit.ErrInvalidRequest.
func (s *Service) Top(name string, n int) (TopReport, error) {
	cfg := s.cfg.Load()
	if _, ok := cfg.Policy(name); !ok {
		return TopReport{}, fmt.Errorf("%w %q", ErrUnknownPolicy, name)
	}
	t := s.top.Load()
	sk := t.byName[name]
	if sk == nil {
		return TopReport{}, ErrTopOff
	}
	o := sk.Options()
	if n < 1 || n > o.Size {
		return TopReport{}, fmt.Errorf("%w: n %d; want 1-%d (server.top.size)", admit.ErrInvalidRequest, n, o.Size)
	}
	r := sk.Top(n)
	return TopReport{Policy: name, Size: o.Size, Period: o.Period, Revealed: o.Reveal, Entries: r.Entries, Bound: r.Bound}, nil
}

// TopEntries calls yield with the entries each policy's sketch holds (at most
// server.top.size), for the policies of the loaded configuration, in its order; none under size 0.
func (s *Service) TopEntries(yield func(policy string, entries int)) {
	cfg, t := s.cfg.Load(), s.top.Load()
	for _, p := range cfg.Policies {
		if sk := t.byName[p.Limit.Name]; sk != nil {
			yield(p.Limit.Name, sk.Len())
		}
	}
}
