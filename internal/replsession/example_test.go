package replsession_test

import (
	"context"
	"fmt"

	"github.com/admit-dev/admit/internal/replsession"
)

// A printed Pending says when it is waited for.
type printed string

func (p printed) Wait(context.Context) error { fmt.Println("one wait for", string(p)); return nil }
func (p printed) Release()                   {}

// A request opens a session; each Store call joins it with its own Pending, made once, and defers
// its wait there; the request waits once, when its calls are done.
func Example() {
	ctx, sess := replsession.New(context.Background())
	for range 3 { // three Store calls of one request
		s := replsession.From(ctx)
		s.Join("primary", func() replsession.Pending { return printed("the primary's writes") })
	}
	if err := sess.Wait(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: one wait for the primary's writes
}
