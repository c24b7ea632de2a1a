package policyjson_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/admit-dev/admit"
	"github.com/admit-dev/admit/internal/policyjson"
	"github.com/admit-dev/admit/policy"
)

func Example() {
	for _, p := range []policy.Policy{
		{Limit: admit.Limit{Name: "per-minute", Algorithm: admit.FixedWindow, Rate: 100, Period: time.Minute}},
		{Limit: admit.Limit{Name: "burst", Algorithm: admit.GCRA, Rate: 5, Period: time.Second, Burst: 20, Shadow: true}},
	} {
		b, _ := json.Marshal(policyjson.Of(p))
		fmt.Println(string(b))
	}
	// Output:
	// {"name":"per-minute","algorithm":"fixed_window","limit":100,"window_ms":60000,"mode":"enforce","failure":"closed"}
	// {"name":"burst","algorithm":"gcra","limit":5,"window_ms":1000,"burst":20,"mode":"shadow","failure":"closed"}
}
