package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// stdCheck decodes data as decodeCheck's encoding/json path does, reporting whether it accepts it.
func stdCheck(data []byte) (CheckRequest, bool) {
	var req CheckRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return req, false
	}
	return req, true
}

// quickSeeds are bodies quickCheck takes and bodies it leaves to encoding/json, for both tests.
var quickSeeds = []string{
	`{"policy":"per-second","key":"a"}`,
	` { "policies" : [ "a" , "b" ] , "key" : "u-1" , "cost" : 0 , "request_id" : "r" , "tier" : "pro" } ` + "\n",
	`{"policy":"p","key":"ключ","cost":-9223372036854775808}`,
	`{"policy":"p","key":"k","cost":9223372036854775807}`,
	`{"key":"k"}`,
	`{}`,
	`{"policy":"p","key":"k"}]`,
	`{"policy":"p","key":"k","cost":9223372036854775808}`,
	`{"policy":"p","key":"k","cost":1.0}`,
	`{"policy":"p","key":"k","cost":1e3}`,
	`{"policy":"p","key":"k","cost":01}`,
	`{"policy":"p","key":"k","cost":-0}`,
	`{"policy":"p","key":"k","cost":"1"}`,
	`{"policy":"p","key":"k","cost":null}`,
	`{"policy":"p","policy":"q","key":"k"}`,
	`{"Policy":"p","key":"k"}`,
	`{"policy":"p","key":"a\"b"}`,
	`{"policy":"p","key":"\u00e9"}`,
	"{\"policy\":\"p\",\"key\":\"\xff\"}",
	"{\"policy\":\"p\",\"key\":\"a\tb\"}",
	`{"policy":"p","key":"k","weight":2}`,
	`{"policies":[],"key":"k"}`,
	`{"policies":["a",],"key":"k"}`,
	`{"policy":"p","key":"k",}`,
	`{"policy":"p","key":"k"} {}`,
	`{"policy":"p","key":"k"`,
	`policy=p`,
	``,
}

// TestQuickCheck holds quickCheck to its shape: the plain bodies decoded, as encoding/json decodes
// them, and every other body left to encoding/json.
func TestQuickCheck(t *testing.T) {
	cost := func(n int64) *int64 { return &n }
	take := map[string]CheckRequest{
		quickSeeds[0]:                        {Policy: "per-second", Key: "a"},
		quickSeeds[1]:                        {Policies: []string{"a", "b"}, Key: "u-1", Cost: cost(0), RequestID: "r", Tier: "pro"},
		quickSeeds[2]:                        {Policy: "p", Key: "ключ", Cost: cost(math.MinInt64)},
		quickSeeds[3]:                        {Policy: "p", Key: "k", Cost: cost(math.MaxInt64)},
		quickSeeds[4]:                        {Key: "k"},
		quickSeeds[5]:                        {},
		`{"policy":"p","key":"k","cost":-0}`: {Policy: "p", Key: "k", Cost: cost(0)},
	}
	for _, body := range quickSeeds {
		got, ok := quickCheck([]byte(body))
		want, taken := take[body]
		switch {
		case ok != taken:
			t.Errorf("quickCheck(%q) took it: %v, want %v", body, ok, taken)
		case ok && !reflect.DeepEqual(got, want):
			t.Errorf("quickCheck(%q) = %+v, want %+v", body, got, want)
		}
	}
}

// FuzzQuickCheck holds quickCheck to encoding/json: a body it takes, encoding/json takes too, and
// decodes to the same CheckRequest.
func FuzzQuickCheck(f *testing.F) {
	for _, s := range quickSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := quickCheck(data)
		if !ok {
			return
		}
		want, std := stdCheck(data)
		if !std {
			t.Fatalf("quickCheck took %q, which encoding/json refuses", data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quickCheck(%q) = %+v, encoding/json %+v", data, got, want)
		}
	})
}
