package topk_test

import (
	"fmt"
	"time"

	"github.com/admit-dev/admit/internal/topk"
)

func Example() {
	s, err := topk.New(topk.Options{Size: 100, Period: 10 * time.Minute})
	if err != nil {
		panic(err)
	}
	for range 3 {
		s.Add("0123456789abcdef0123456789abcdef", "alice") // not revealed: the digest alone is kept
	}
	s.Add("fedcba9876543210fedcba9876543210", "bob")
	r := s.Top(20)
	for _, e := range r.Entries {
		fmt.Println(e.Digest, e.Rejected, e.Error, e.Key == "")
	}
	fmt.Println("bound", r.Bound)
	// Output:
	// 0123456789abcdef0123456789abcdef 3 0 true
	// fedcba9876543210fedcba9876543210 1 0 true
	// bound 0
}
