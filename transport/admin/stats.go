package admin

import (
	"log/slog"
	"net/http"
	"time"
)

// A Sample is one series of the instance's own counters and gauges, as /metrics exports it: its
// metric name, its labels and its value now.
type Sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// StatsResponse is the JSON body of a 200 answer of GET /v1/stats: this instance's counters at
// one instant. A rate is the difference of two answers over the difference of their TimeMS.
type StatsResponse struct {
	// TimeMS is when the samples were read, in milliseconds since the Unix epoch.
	TimeMS  int64    `json:"time_ms"`
	Samples []Sample `json:"samples"`
}

// stats serves GET /v1/stats: 200 and a StatsResponse of Options.Stats; 404 when the Handler has
// no Stats, 503 when it fails. It takes no query: a parameter is a 400.
func (h *Handler) stats(w http.ResponseWriter, r *http.Request, _ []byte) {
	switch {
	case r.URL.RawQuery != "":
		writeError(w, http.StatusBadRequest, "GET /v1/stats takes no query")
		return
	case h.statsOf == nil:
		writeError(w, http.StatusNotFound, "no counters: this admin API was built without Options.Stats")
		return
	}
	now := time.Now()
	samples, err := h.statsOf()
	if err != nil {
		h.log.Log(r.Context(), logUnavailable, err, slog.String("path", r.URL.Path))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "cannot read the counters")
		return
	}
	if samples == nil {
		samples = []Sample{}
	}
	writeJSON(w, http.StatusOK, StatsResponse{TimeMS: now.UnixMilli(), Samples: samples})
}
