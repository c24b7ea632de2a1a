package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/admit-dev/admit/internal/validate"
	"github.com/admit-dev/admit/service"
)

// DefaultTopN is the number of subjects GET /v1/top answers without n (at most the sketch's size).
const DefaultTopN = 20

// TopResponse is the JSON body of a 200 answer of GET /v1/top: this instance's own count.
type TopResponse struct {
	Policy string `json:"policy"`
	// Size is the number of subjects the policy's sketch counts (server.top.size).
	Size int `json:"size"`
	// PeriodMS is server.top.period: a rejection counts for at least all of it, at most a tenth more.
	PeriodMS int64 `json:"period_ms"`
	// Revealed reports whether raw subjects are kept (server.top.reveal_subjects).
	Revealed bool `json:"revealed"`
	// ErrorBound is the most by which any subject's rejected count may be off, listed or not:
	// 0 while the counts are exact.
	ErrorBound uint64 `json:"error_bound"`
	// Subjects are the subjects rejected most, most first.
	Subjects []TopSubject `json:"subjects"`
}

// TopAllResponse is the JSON body of a 200 answer of GET /v1/top without a policy: the
// TopResponse of every policy of the loaded configuration, in its order.
type TopAllResponse struct {
	Policies []TopResponse `json:"policies"`
}

// TopSubject is one subject of a TopResponse.
type TopSubject struct {
	// Key is the raw subject, only when revealed: else omitted.
	Key string `json:"key,omitempty"`
	// Digest is the subject digest its keys end with.
	Digest string `json:"digest"`
	// Rejected is the rejections counted, at most Error above the true number.
	Rejected uint64 `json:"rejected"`
	// Error is the most of Rejected that may be other subjects'.
	Error     uint64    `json:"error"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// top serves GET /v1/top?policy=P[&n=N]: 200 and a TopResponse; without policy (or policy=""),
// 200 and a TopAllResponse of every policy, n each. 400 for a bad query, 404 for an unknown policy
// or when no sketch is kept (server.top.size 0).
func (h *Handler) top(w http.ResponseWriter, r *http.Request, _ []byte) {
	query, ok := strictQuery(w, r, "policy", "n")
	if !ok {
		return
	}
	n := DefaultTopN
	if query.Has("n") {
		var err error
		if n, err = strconv.Atoi(query.Get("n")); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n %q: want a whole number from 1 to server.top.size", query.Get("n")))
			return
		}
	} else if cfg := h.svc.Config(); cfg.Server.Top.Size > 0 {
		n = min(n, cfg.Server.Top.Size)
	}
	names := []string{query.Get("policy")}
	if names[0] == "" {
		names = names[:0]
		for _, p := range h.svc.Config().Policies {
			names = append(names, p.Limit.Name)
		}
	}
	all := TopAllResponse{Policies: make([]TopResponse, 0, len(names))}
	for _, name := range names {
		rep, err := h.svc.Top(name, n)
		switch {
		case errors.Is(err, service.ErrUnknownPolicy), errors.Is(err, service.ErrTopOff):
			writeError(w, http.StatusNotFound, validate.ClientMessage(err))
			return
		case err != nil:
			writeError(w, http.StatusBadRequest, validate.ClientMessage(err))
			return
		}
		out := TopResponse{Policy: rep.Policy, Size: rep.Size, PeriodMS: rep.Period.Milliseconds(), Revealed: rep.Revealed,
			ErrorBound: rep.Bound, Subjects: make([]TopSubject, len(rep.Entries))}
		for i, e := range rep.Entries {
			out.Subjects[i] = TopSubject{Key: e.Key, Digest: e.Digest, Rejected: e.Rejected, Error: e.Error,
				FirstSeen: e.FirstSeen.UTC(), LastSeen: e.LastSeen.UTC()}
		}
		all.Policies = append(all.Policies, out)
	}
	if query.Get("policy") != "" {
		writeJSON(w, http.StatusOK, all.Policies[0])
		return
	}
	writeJSON(w, http.StatusOK, all)
}
