package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/httplimit"
	"github.com/admit-dev/admit/internal/ratelimitfield"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
)

// demo serves GET /demo: one unit of DemoSubject under every policy of its configuration, decided
// by the Service as any check is, and answered as package httplimit's middleware answers.
type demo struct {
	svc      *service.Service
	cfg      *policy.Config // the demo's policies, decided instead of the loaded configuration's
	policies []string       // the names of cfg's policies, in its order
	leases   bool           // whether a concurrency policy leases: an admitted request is released
	answers  *httplimit.Answers
}

// newDemo returns the handler of GET /demo, deciding the policies of cfg on svc.
func newDemo(svc *service.Service, cfg *policy.Config, answers *httplimit.Answers) *demo {
	d := &demo{svc: svc, cfg: cfg, answers: answers}
	for _, p := range cfg.Policies {
		d.policies = append(d.policies, p.Limit.Name)
		d.leases = d.leases || p.Limit.Algorithm == admit.Concurrency
	}
	return d
}

// An admission is a decided demo request, and the release of its leases (nil for none).
type admission struct {
	res     service.Result
	release func()
}

func (d *demo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, err := d.decide(r.Context())
	if a.release != nil {
		defer a.release() // after the answer is written, or on a panic
	}
	if err != nil {
		d.answers.Failed(w, r, err, false)
		return
	}
	ds := a.res.Decisions
	if dec := ds[a.res.Deciding]; !dec.Allowed {
		d.answers.Limited(w, ds, ratelimitfield.RetryAfter(dec))
		return
	}
	d.answers.SetFields(w.Header(), ds, 0)
	ok(w, r)
}

// decide decides one demo request, a panic in it turned into a *httplimit.PanicError.
func (d *demo) decide(ctx context.Context) (a admission, err error) {
	defer httplimit.Recover(&err)
	c := service.Check{Policies: d.policies, Subject: admit.Subject{ID: DemoSubject}, Cost: 1, Config: d.cfg}
	if !d.leases {
		res, err := d.svc.Check(ctx, c)
		return admission{res: res}, err
	}
	res, release, err := d.svc.Admit(ctx, c)
	return admission{res: res, release: release}, err
}

// policyNames returns the names of cfg's policies joined by ",", as the log attribute limit.
func policyNames(cfg *policy.Config) string {
	names := make([]string, len(cfg.Policies))
	for i, p := range cfg.Policies {
		names[i] = p.Limit.Name
	}
	return strings.Join(names, ",")
}
