package httplimit

import (
	"strconv"

	"github.com/admit-dev/admit"
)

// QuotaExceededType is the type of the RFC 9457 problem details of a 429 response with
// [Middleware.ProblemDetails]: the quota-exceeded problem type of draft-ietf-httpapi-ratelimit-headers.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// QuotaExceededTitle is the title of the problem details of a 429 response.
const QuotaExceededTitle = "Request cannot be satisfied as assigned quota has been exceeded"

// appendProblem appends the RFC 9457 problem details of a 429 response whose Decisions are ds, for
// limits, with Retry-After retryAfter, and a newline: a JSON object of type, title, status, detail
// and violated-policies, the name of each policy that rejected, in order. It writes the JSON itself,
// byte for byte what encoding/json makes of it, with no allocation: the strings need no escapes
// (the constants are plain ASCII, and a valid policy name is a-z, 0-9, '_' and '-').
func appendProblem(b []byte, limits []admit.Limit, ds []admit.Decision, retryAfter int64) []byte {
	b = append(b, `{"type":"`+QuotaExceededType+`","title":"`+QuotaExceededTitle+`","status":429,"detail":"Too many requests: retry after `...)
	b = strconv.AppendInt(b, retryAfter, 10)
	b = append(b, ` s.","violated-policies":[`...)
	first := true
	for i := range ds {
		if ds[i].Allowed {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(append(append(b, '"'), limits[i].Name...), '"')
	}
	return append(b, "]}\n"...)
}
