package httplimit

import (
	"encoding/json"
	"strconv"

	"github.com/admit-dev/admit"
)

// QuotaExceededType is the type of the RFC 9457 problem details of a 429 response with
// [Middleware.ProblemDetails]: the quota-exceeded problem type of draft-ietf-httpapi-ratelimit-headers.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// QuotaExceededTitle is the title of the problem details of a 429 response.
const QuotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded"

// problem is the RFC 9457 problem details of a 429 response.
type problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// problemBody returns the problem details of a 429 response whose Decisions are ds, for limits,
// with Retry-After retryAfter: violated-policies names each policy that rejected, in order.
func problemBody(limits []admit.Limit, ds []admit.Decision, retryAfter int64) string {
	p := problem{
		Type:             QuotaExceededType,
		Title:            QuotaExceededTitle,
		Status:           429,
		Detail:           "Too many requests: retry after " + strconv.FormatInt(retryAfter, 10) + " s.",
		ViolatedPolicies: []string{},
	}
	for i := range ds {
		if !ds[i].Allowed {
			p.ViolatedPolicies = append(p.ViolatedPolicies, limits[i].Name)
		}
	}
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: strings and an int
		return "{}\n"
	}
	return string(append(b, '\n'))
}
