package httpapi_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/policy"
	"github.com/admit-dev/admit/service"
	"github.com/admit-dev/admit/transport/httpapi"
)

// readmeConfig is the README's configuration: a GCRA policy of 10 per second with a burst of 20,
// and a daily fixed window in shadow mode.
const readmeConfig = `
policies:
  - name: per-second
    algorithm: gcra
    limit: 10
    window: 1s
    burst: 20
  - name: per-day
    algorithm: fixed_window
    limit: 1000
    window: 24h
    mode: shadow
`

// quotaOf returns the q and w of the member named name of a RateLimit-Policy field value such as
// `"per-second";q=20;w=2`, and whether there is one.
func quotaOf(t *testing.T, field, name string) (q, w int64, ok bool) {
	t.Helper()
	for m := range strings.SplitSeq(field, ", ") {
		params := strings.Split(m, ";")
		if params[0] != strconv.Quote(name) {
			continue
		}
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(p, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			switch {
			case k != "q" && k != "w":
			case err != nil:
				t.Fatalf("%s in %q is not an integer", p, field)
			case k == "q":
				q = n
			default:
				w = n
			}
		}
		return q, w, true
	}
	return 0, 0, false
}

// TestCheckLimitIsTheHeadersQuota checks the README's example: the JSON limit of a GCRA policy is
// the quota its RateLimit-Policy member announces, the bucket of 20 (not the rate, 10, beside a
// remaining of 19), over the 2 s an empty bucket takes to fill, for the deciding policy and each
// decision.
func TestCheckLimitIsTheHeadersQuota(t *testing.T) {
	cfg, err := policy.Parse("admit.yaml", []byte(readmeConfig))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admit.NewKeyBuilder(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(newMemstore(t), keys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Service: svc, Demo: demoConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	rec := post(h, `{"policies":["per-second","per-day"],"key":"alice","cost":1}`)
	res := decode[httpapi.CheckResponse](t, rec)
	if rec.Code != http.StatusOK || res.Policy != "per-second" || res.Remaining != 19 || len(res.Decisions) != 2 {
		t.Fatalf("%d %+v; want 200 from per-second with 19 remaining", rec.Code, res)
	}
	field := rec.Header().Get("RateLimit-Policy")
	q, w, ok := quotaOf(t, field, "per-second")
	if !ok || q != 20 || w != 2 {
		t.Fatalf("RateLimit-Policy %q; want per-second;q=20;w=2", field)
	}
	if res.Limit != q || res.Remaining > res.Limit {
		t.Errorf("JSON limit %d, remaining %d; RateLimit-Policy q=%d: want the limit to be the quota", res.Limit, res.Remaining, q)
	}
	if d := res.Decisions[0]; d.Limit != q {
		t.Errorf("decision %+v: limit %d; want the quota %d", d, d.Limit, q)
	}
	if d := res.Decisions[1]; d.Limit != 1000 { // in shadow mode: no member, but the same definition
		t.Errorf("decision %+v: limit %d; want 1000", d, d.Limit)
	}
}
