package httpproxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The answers of a Proxy, the values of the answer label of admit_proxy_requests_total.
const (
	// AnswerForwarded is a request admitted by its route and forwarded to the upstream.
	AnswerForwarded = "forwarded"
	// AnswerUnrouted is a request that matched no route and was forwarded unlimited.
	AnswerUnrouted = "unrouted"
	// AnswerLimited is a request answered 429 by its route.
	AnswerLimited = "limited"
	// AnswerRedirected is a GET or HEAD whose path needed cleaning, answered 308.
	AnswerRedirected = "redirected"
	// AnswerNonCanonical is a request whose path is not in canonical form, answered 400.
	AnswerNonCanonical = "non_canonical"
	// AnswerMalformed is any other request answered 400: a bad forwarding header, a missing or
	// untrusted subject header.
	AnswerMalformed = "malformed"
	// AnswerInvalid is a request answered 500: its check is invalid (a server bug).
	AnswerInvalid = "invalid"
	// AnswerUnavailable is a request answered 503: the limiter could not decide.
	AnswerUnavailable = "unavailable"
)

// answerNames are the answers, in the order of the counters of a counters.
var answerNames = [nAnswers]string{AnswerForwarded, AnswerUnrouted, AnswerLimited, AnswerRedirected, AnswerNonCanonical, AnswerMalformed, AnswerInvalid, AnswerUnavailable}

// The indexes of answerNames.
const (
	ansForwarded = iota
	ansUnrouted
	ansLimited
	ansRedirected
	ansNonCanonical
	ansMalformed
	ansInvalid
	ansUnavailable
	nAnswers // the number of answers
)

// counters are a Proxy's metrics, resolved once.
type counters struct {
	answers  [nAnswers]prometheus.Counter
	upstream prometheus.Counter // forwarded requests the upstream did not answer (502)
}

// newCounters returns the counters of a Proxy, registered into reg unless it is nil.
func newCounters(reg prometheus.Registerer) (*counters, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "admit_proxy_requests_total",
		Help: "Requests answered by admit proxy, by answer (forwarded, unrouted, limited, redirected, non_canonical, malformed, invalid, unavailable).",
	}, []string{"answer"})
	up := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "admit_proxy_upstream_errors_total",
		Help: "Forwarded requests that the upstream did not answer, answered 502 Bad Gateway.",
	})
	c := &counters{upstream: up}
	for i, name := range answerNames {
		c.answers[i] = vec.WithLabelValues(name) // every series present from the start, at 0
	}
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(vec); err != nil {
		return nil, err
	}
	if err := reg.Register(up); err != nil {
		reg.Unregister(vec)
		return nil, err
	}
	return c, nil
}
