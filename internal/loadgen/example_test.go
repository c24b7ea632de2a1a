package loadgen_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/admit-dev/admit/internal/loadgen"
)

// Drive a server at 100 requests per second for half a second, and read the results.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	get := loadgen.HTTP(http.DefaultClient, func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	})
	res, err := loadgen.Run(context.Background(), loadgen.Config{Rate: 100, Duration: 500 * time.Millisecond, Window: 250 * time.Millisecond}, get)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Total.Scheduled, res.Total.Dropped, res.Total.Outcomes, res.Total.Errors())
	for _, w := range res.Windows {
		fmt.Println(w.Start, w.Scheduled, w.Latency.Count())
	}
	_ = res.Total.Latency.Quantile(0.99) // p99, from the scheduled send times; it varies from run to run
	// Output:
	// 50 0 map[200:50] 0
	// 0s 25 25
	// 250ms 25 25
}
